/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the JSON output shared by mendctl and fsck.mendfs
 * (fs/json/mfs_json.c): the UTF-8 validator against a reference decoder (every
 * 1-, 2- and 3-byte string, 4-byte strings over every lead and second byte),
 * overlongs, surrogates and code points past U+10FFFF rejected; the U+FFFD
 * replacement of invalid bytes; names kept byte for byte (KEY_hex when not
 * UTF-8); escaping ('"', '\\', control characters; '/' left alone); the
 * error object.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfs_json.h"
#include "check_run.h"

/* The reference: decode by the bit patterns, then reject what RFC 3629 forbids. */
static size_t ref_seq(const unsigned char *s, size_t len)
{
	static const unsigned long min[5] = {0, 0, 0x80, 0x800, 0x10000};
	unsigned long cp;
	size_t n;

	if (!len)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

START_TEST(test_seq_exhaustive)
{
	unsigned char s[4];
	static const unsigned char tail[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90,
	                                     0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xff};

	for (unsigned a = 0; a < 256; a++) {
		s[0] = (unsigned char)a;
		ck_assert_uint_eq(mfs_utf8_seq(s, 1), ref_seq(s, 1));
		for (unsigned b = 0; b < 256; b++) {
			s[1] = (unsigned char)b;
			ck_assert_uint_eq(mfs_utf8_seq(s, 2), ref_seq(s, 2));
			for (unsigned c = 0; c < 256; c++) {
				s[2] = (unsigned char)c;
				if (mfs_utf8_seq(s, 3) != ref_seq(s, 3))
					ck_abort_msg("%02x %02x %02x: %zu, expected %zu", a, b, c,
					             mfs_utf8_seq(s, 3), ref_seq(s, 3));
			}
			if (a < 0xf0)
				continue;
			for (size_t i = 0; i < sizeof(tail); i++) {
				for (size_t j = 0; j < sizeof(tail); j++) {
					s[2] = tail[i];
					s[3] = tail[j];
					ck_assert_uint_eq(mfs_utf8_seq(s, 4), ref_seq(s, 4));
				}
			}
		}
	}
	ck_assert_uint_eq(mfs_utf8_seq(s, 0), 0);
}
END_TEST

static bool valid(const char *s)
{
	return mfs_utf8_valid(s, strlen(s));
}

START_TEST(test_valid)
{
	ck_assert(valid(""));
	ck_assert(valid("/caf\xc3\xa9.txt"));
	ck_assert(valid("\x01\x1f\x7f"));
	ck_assert(valid("\xe0\xa0\x80"));     /* U+0800 */
	ck_assert(valid("\xed\x9f\xbf"));     /* U+D7FF */
	ck_assert(valid("\xee\x80\x80"));     /* U+E000 */
	ck_assert(valid("\xef\xbf\xbf"));     /* U+FFFF */
	ck_assert(valid("\xf0\x90\x80\x80")); /* U+10000 */
	ck_assert(valid("\xf0\x9f\x98\x80")); /* U+1F600 */
	ck_assert(valid("\xf4\x8f\xbf\xbf")); /* U+10FFFF */
	ck_assert(!valid("bad\xff"));
	ck_assert(!valid("\x80"));                     /* a lone continuation byte */
	ck_assert(!valid("\xc0\x80"));                 /* overlong U+0000 */
	ck_assert(!valid("\xc1\xbf"));                 /* overlong U+007F */
	ck_assert(!valid("\xe0\x80\xaf"));             /* overlong '/' */
	ck_assert(!valid("\xe0\x9f\xbf"));             /* overlong U+07FF */
	ck_assert(!valid("\xf0\x8f\xbf\xbf"));         /* overlong U+FFFF */
	ck_assert(!valid("\xed\xa0\x80"));             /* U+D800 */
	ck_assert(!valid("\xed\xbf\xbf"));             /* U+DFFF */
	ck_assert(!valid("\xed\xa0\xbd\xed\xb8\x80")); /* a CESU-8 surrogate pair */
	ck_assert(!valid("\xf4\x90\x80\x80"));         /* U+110000 */
	ck_assert(!valid("\xf5\x80\x80\x80"));
	ck_assert(!valid("\xf8\x88\x80\x80\x80")); /* 5-byte form */
	ck_assert(!valid("\xc3"));                 /* truncated */
	ck_assert(!valid("\xe2\x82"));
	ck_assert(!valid("\xf0\x9f\x98"));
	ck_assert(!valid("\xc3\x41")); /* bad continuation */
	ck_assert(!valid("\xe2\x28\xa1"));
	/* the length is honoured: a valid sequence cut by @len is invalid */
	ck_assert(!mfs_utf8_valid("\xc3\xa9", 1));
	ck_assert(mfs_utf8_valid("a\xff", 1));
}
END_TEST

START_TEST(test_sanitize)
{
	static const struct {
		const char *in, *out;
	} c[] = {
	        {"", ""},
	        {"/caf\xc3\xa9.txt", "/caf\xc3\xa9.txt"},
	        {"bad\xff", "bad\xef\xbf\xbd"},
	        {"\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd"}, /* one U+FFFD a byte */
	        {"\xed\xa0\x80x", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx"},
	        {"\xff\xc3\xa9\xfe", "\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd"},
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *s = mfs_utf8_sanitize(c[i].in);

		ck_assert_ptr_nonnull(s);
		ck_assert_str_eq(s, c[i].out);
		ck_assert(valid(s));
		free(s);
	}
}
END_TEST

/* mfs_name_escape: the `ls -b` escaping of names in human reports. */
START_TEST(test_name_escape)
{
	static const struct {
		const char *in, *out;
	} c[] = {
	        {"", ""},
	        {"/plain name.txt", "/plain name.txt"},
	        {"/caf\xc3\xa9.txt", "/caf\xc3\xa9.txt"},
	        {"a\nb\tc\rd", "a\\nb\\tc\\rd"},
	        {"\a\b\v\f", "\\a\\b\\v\\f"},
	        {"back\\slash", "back\\\\slash"},
	        {"\x01\x1b[31m\x7f", "\\001\\033[31m\\177"},
	        {"bad\xff", "bad\\377"},
	        {"\xe2\x82", "\\342\\202"},       /* truncated sequence */
	        {"c1\xc2\x85", "c1\\302\\205"},   /* U+0085 NEL, a C1 control */
	        {"nbsp\xc2\xa0", "nbsp\xc2\xa0"}, /* U+00A0 is printable */
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char *s = mfs_name_escape(c[i].in);

		ck_assert_ptr_nonnull(s);
		ck_assert_str_eq(s, c[i].out);
		free(s);
	}
}
END_TEST

/* What mfs_json_print() writes for @obj. */
static char *printed(struct json_object *obj)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(mfs_json_print(f, obj), 0);
	fclose(f);
	return buf;
}

static void check_name(const char *name, const char *expect)
{
	struct json_object *o = json_object_new_object();
	char *s;

	ck_assert_int_eq(mfs_json_add_name(o, "path", name), 0);
	s = printed(o);
	ck_assert_str_eq(s, expect);
	free(s);
}

START_TEST(test_names)
{
	/* UTF-8 unchanged, '/' not escaped, no _hex key */
	check_name("/caf\xc3\xa9.txt", "{\"path\":\"/caf\xc3\xa9.txt\"}\n");
	check_name("/\xf0\x9f\x98\x80", "{\"path\":\"/\xf0\x9f\x98\x80\"}\n");
	/* not UTF-8: U+FFFD in path, the exact bytes in path_hex */
	check_name("/bad\xff", "{\"path\":\"/bad\xef\xbf\xbd\",\"path_hex\":\"2f626164ff\"}\n");
	check_name("\xc0\xaf", "{\"path\":\"\xef\xbf\xbd\xef\xbf\xbd\",\"path_hex\":\"c0af\"}\n");
	/* JSON's own escapes */
	check_name("a\"b\\c\nd\x01\x7f", "{\"path\":\"a\\\"b\\\\c\\nd\\u0001\x7f\"}\n");
}
END_TEST

START_TEST(test_text_and_numbers)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array();
	char *s;

	ck_assert_int_eq(mfs_json_add_text(o, "message", "x\xff"), 0);
	ck_assert_int_eq(mfs_json_add_u64(o, "big", UINT64_MAX), 0);
	ck_assert_int_eq(mfs_json_add_int(o, "code", -3), 0);
	ck_assert_int_eq(mfs_json_add_bool(o, "yes", true), 0);
	ck_assert_int_eq(mfs_json_add_range(a, 512, 4096), 0);
	ck_assert_int_eq(mfs_json_add(o, "ranges", a), 0);
	ck_assert_int_eq(mfs_json_add(o, "none", NULL), -ENOMEM);
	s = printed(o);
	ck_assert_str_eq(
	        s, "{\"message\":\"x\xef\xbf\xbd\",\"big\":18446744073709551615,"
	           "\"code\":-3,\"yes\":true,\"ranges\":[{\"offset\":512,\"length\":4096}]}\n");
	free(s);
}
END_TEST

START_TEST(test_error_object)
{
	struct json_object *extra = json_object_new_object();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_int_eq(mfs_json_add_name(extra, "device", "/dev/x\xfe"), 0);
	/* a key of the error object itself is not overridden by @extra */
	ck_assert_int_eq(mfs_json_add_int(extra, "exit_code", 99), 0);
	mfs_json_error(f, "open /dev/x\xfe: no such file", 8, extra);
	mfs_json_error(f, "usage", 16, NULL);
	fclose(f);
	ck_assert_str_eq(buf,
	                 "{\"error\":\"open /dev/x\xef\xbf\xbd: no such file\",\"exit_code\":8,"
	                 "\"device\":\"/dev/x\xef\xbf\xbd\",\"device_hex\":\"2f6465762f78fe\"}\n"
	                 "{\"error\":\"usage\",\"exit_code\":16}\n");
	free(buf);
}
END_TEST

static Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_seq_exhaustive);
	tcase_add_test(tc, test_valid);
	tcase_add_test(tc, test_sanitize);
	tcase_add_test(tc, test_name_escape);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_text_and_numbers);
	tcase_add_test(tc, test_error_object);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_run(json_suite());
}
