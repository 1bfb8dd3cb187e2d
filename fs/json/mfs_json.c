/* SPDX-License-Identifier: MIT */
/*
 * mfs_json: JSON output shared by mendctl and fsck.mendfs (mfs_json.h): a
 * UTF-8 validator, the text and name encodings of strings, and printing one
 * object per line with json-c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs_json.h"

/* JSON_C_TO_STRING_NOSLASHESCAPE: paths read "/a/b", not "\/a\/b" */
#define MFS_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

size_t mfs_utf8_seq(const unsigned char *s, size_t len)
{
	unsigned char c, lo = 0x80, hi = 0xbf;
	size_t n;

	if (!len)
		return 0;
	c = s[0];
	if (c < 0x80)
		return 1;
	if (c < 0xc2) /* continuation bytes, and the overlong C0/C1 leads */
		return 0;
	if (c < 0xe0) {
		n = 2;
	} else if (c < 0xf0) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong below U+0800 */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates U+D800..U+DFFF */
	} else if (c < 0xf5) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong below U+10000 */
		else if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0; /* F5..FF: past U+10FFFF or never valid */
	}
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

bool mfs_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	while (len) {
		size_t n = mfs_utf8_seq(p, len);

		if (!n)
			return false;
		p += n;
		len -= n;
	}
	return true;
}

char *mfs_utf8_sanitize(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), o = 0;
	char *out = malloc(len * 3 + 1); /* one byte grows to at most three (U+FFFD) */

	if (!out)
		return NULL;
	while (len) {
		size_t n = mfs_utf8_seq(p, len);

		if (n) {
			memcpy(out + o, p, n);
			o += n;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			n = 1;
		}
		p += n;
		len -= n;
	}
	out[o] = '\0';
	return out;
}

char *mfs_name_escape(const char *s)
{
	static const char named[] = "abtnvfr"; /* \a (7) to \r (13) */
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), o = 0;
	char *out = malloc(len * 4 + 1); /* one byte grows to at most four (\ooo) */

	if (!out)
		return NULL;
	while (len) {
		size_t n = mfs_utf8_seq(p, len);

		if (n == 1 && *p == '\\') {
			out[o++] = '\\';
			out[o++] = '\\';
		} else if (n == 1 && *p >= 7 && *p <= 13) {
			out[o++] = '\\';
			out[o++] = named[*p - 7];
		} else if (n && *p >= 0x20 && *p != 0x7f &&
		           !(n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
			memcpy(out + o, p, n);
			o += n;
		} else {
			/* a control byte, a C1 control (both its bytes), or invalid */
			n = n ? n : 1;
			for (size_t i = 0; i < n; i++)
				o += (size_t)sprintf(out + o, "\\%03o", p[i]);
		}
		p += n;
		len -= n;
	}
	out[o] = '\0';
	return out;
}

struct json_object *mfs_json_text(const char *s)
{
	struct json_object *js;
	char *t;

	if (mfs_utf8_valid(s, strlen(s)))
		return json_object_new_string(s);
	t = mfs_utf8_sanitize(s);
	if (!t)
		return NULL;
	js = json_object_new_string(t);
	free(t);
	return js;
}

int mfs_json_add(struct json_object *obj, const char *key, struct json_object *val)
{
	if (!val)
		return -ENOMEM;
	if (json_object_object_add(obj, key, val)) {
		json_object_put(val);
		return -ENOMEM;
	}
	return 0;
}

int mfs_json_add_text(struct json_object *obj, const char *key, const char *s)
{
	return mfs_json_add(obj, key, mfs_json_text(s));
}

int mfs_json_add_name(struct json_object *obj, const char *key, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t len = strlen(s), klen = strlen(key);
	char *h, *k;
	int ret;

	ret = mfs_json_add_text(obj, key, s);
	if (ret || mfs_utf8_valid(s, len))
		return ret;
	h = malloc(len * 2 + 1);
	k = malloc(klen + sizeof("_hex"));
	if (!h || !k) {
		free(h);
		free(k);
		return -ENOMEM;
	}
	for (size_t i = 0; i < len; i++) {
		h[2 * i] = hex[(unsigned char)s[i] >> 4];
		h[2 * i + 1] = hex[(unsigned char)s[i] & 15];
	}
	h[2 * len] = '\0';
	memcpy(k, key, klen);
	memcpy(k + klen, "_hex", sizeof("_hex"));
	ret = mfs_json_add(obj, k, json_object_new_string(h));
	free(h);
	free(k);
	return ret;
}

int mfs_json_add_u64(struct json_object *obj, const char *key, uint64_t v)
{
	return mfs_json_add(obj, key, json_object_new_uint64(v));
}

int mfs_json_add_int(struct json_object *obj, const char *key, int v)
{
	return mfs_json_add(obj, key, json_object_new_int(v));
}

int mfs_json_add_bool(struct json_object *obj, const char *key, bool v)
{
	return mfs_json_add(obj, key, json_object_new_boolean(v));
}

int mfs_json_add_range(struct json_object *arr, uint64_t off, uint64_t len)
{
	struct json_object *r = json_object_new_object();

	if (!r)
		return -ENOMEM;
	if (mfs_json_add_u64(r, "offset", off) || mfs_json_add_u64(r, "length", len) ||
	    json_object_array_add(arr, r)) {
		json_object_put(r);
		return -ENOMEM;
	}
	return 0;
}

int mfs_json_print(FILE *f, struct json_object *obj)
{
	const char *s;
	int ret = 0;

	if (!obj)
		return -ENOMEM;
	s = json_object_to_json_string_ext(obj, MFS_JSON_FLAGS);
	if (!s)
		ret = -ENOMEM;
	else if (fputs(s, f) == EOF || fputc('\n', f) == EOF || fflush(f))
		ret = -EIO;
	json_object_put(obj);
	return ret;
}

void mfs_json_error(FILE *f, const char *msg, int exit_code, struct json_object *extra)
{
	struct json_object *e = json_object_new_object();
	int ret = e ? 0 : -ENOMEM;

	if (!ret)
		ret = mfs_json_add_text(e, "error", msg);
	if (!ret)
		ret = mfs_json_add_int(e, "exit_code", exit_code);
	if (extra) {
		json_object_object_foreach(extra, k, v)
		{
			if (!ret && !json_object_object_get_ex(e, k, NULL))
				ret = mfs_json_add(e, k, json_object_get(v));
		}
		json_object_put(extra);
	}
	if (ret) {
		json_object_put(e);
		fprintf(f, "{\"error\":\"out of memory\",\"exit_code\":%d}\n", exit_code);
		fflush(f);
		return;
	}
	mfs_json_print(f, e);
}

int mfs_json_fail(bool json, int exit_code, const char *prog, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", prog, msg);
	if (json)
		mfs_json_error(stdout, msg, exit_code, NULL);
	return exit_code;
}
