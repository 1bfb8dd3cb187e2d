/* SPDX-License-Identifier: MIT */
/*
 * mfs_json: the JSON output of mendctl and fsck.mendfs, over json-c.  Both
 * tools print one object per run, on one line: a result, or on error
 * {"error": MESSAGE, "exit_code": N, ...} and never a result.
 *
 * Strings: json-c writes a string's bytes as given, so every string goes
 * through here.  Valid UTF-8 comes out as the same characters (only '"', '\\'
 * and control characters are escaped; '/' is not).  A *text* (a message) that
 * is not valid UTF-8 has each byte that does not begin a valid sequence
 * replaced by U+FFFD.  A *name* (a path) is written the same way under KEY,
 * and when it is not valid UTF-8 KEY_hex holds its exact bytes as lowercase
 * hex (two digits a byte): reversible (docs/man/fsck.mendfs.8, mendctl.8).
 */
#ifndef MENDFS_FS_MFS_JSON_H
#define MENDFS_FS_MFS_JSON_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Length of the valid UTF-8 sequence at @s (at most @len bytes), 0 when none
 * starts there: overlong forms, surrogates (U+D800..U+DFFF), code points past
 * U+10FFFF and truncated sequences are invalid.
 */
size_t mfs_utf8_seq(const unsigned char *s, size_t len);
/* True when the @len bytes at @s are valid UTF-8. */
bool mfs_utf8_valid(const char *s, size_t len);
/* A malloc'd copy of @s with every byte that begins no valid sequence replaced by U+FFFD (NULL:
 * ENOMEM). */
char *mfs_utf8_sanitize(const char *s);
/*
 * A malloc'd copy of @s for a human report, escaped as `ls -b` does, so that
 * it never breaks a line: backslash as \\, \a \b \t \n \v \f \r by name,
 * other control bytes (C0, DEL, the C1 controls U+0080..U+009F) and every
 * byte that begins no valid UTF-8 sequence as \ooo (three octal digits).
 * Valid UTF-8 otherwise stays as it is.  NULL: ENOMEM.
 */
char *mfs_name_escape(const char *s);

/* A JSON string of text @s (invalid bytes as U+FFFD).  Returns NULL when out of memory. */
struct json_object *mfs_json_text(const char *s);
/* @obj[@key] = text @s.  Returns 0 or -ENOMEM. */
int mfs_json_add_text(struct json_object *obj, const char *key, const char *s);
/* @obj[@key] = name @s, and @key + "_hex" when @s is not valid UTF-8.  Returns 0 or -ENOMEM. */
int mfs_json_add_name(struct json_object *obj, const char *key, const char *s);
/* @obj[@key] = @v (a JSON integer).  Returns 0 or -ENOMEM. */
int mfs_json_add_u64(struct json_object *obj, const char *key, uint64_t v);
int mfs_json_add_int(struct json_object *obj, const char *key, int v);
int mfs_json_add_bool(struct json_object *obj, const char *key, bool v);
/* Append {"offset": @off, "length": @len} to array @arr.  Returns 0 or -ENOMEM. */
int mfs_json_add_range(struct json_object *arr, uint64_t off, uint64_t len);
/* Add @val under @key (NULL @val: -ENOMEM; @val is dropped on failure).  Returns 0 or -ENOMEM. */
int mfs_json_add(struct json_object *obj, const char *key, struct json_object *val);

/*
 * Print @obj as one line to @f and drop the reference.  Returns 0, -ENOMEM,
 * or -EIO when writing failed.
 */
int mfs_json_print(FILE *f, struct json_object *obj);
/*
 * Print the error object {"error": @msg, "exit_code": @exit_code} (text @msg),
 * plus @extra's members when @extra is not NULL (the reference is dropped).
 * Out of memory, it still prints {"error": "out of memory", "exit_code": N}.
 */
void mfs_json_error(FILE *f, const char *msg, int exit_code, struct json_object *extra);
/*
 * A command's error: "@prog: MESSAGE" on stderr and, when @json, the error
 * object on stdout (mfs_json_error).  Returns @exit_code.
 */
int mfs_json_fail(bool json, int exit_code, const char *prog, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif /* MENDFS_FS_MFS_JSON_H */
