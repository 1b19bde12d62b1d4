/*
 * Stack spec parser.
 *
 *   spec   := [ filter { ">" filter } ]
 *   filter := name [ "(" args ")" ]
 *   name   := [A-Za-z0-9_-]+        (the file <name>.so in the filter dir)
 *
 * args are handed to the filter's pass_args untouched (trimmed): filters own
 * their argument syntax, as in Konnector. They may not contain "(", ")" or
 * ">", so a spec always splits the same way.
 */
#include "spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *spec, size_t pos, const char *expected)
{
    char found[16];

    if (spec[pos] == '\0')
        snprintf(found, sizeof found, "end of spec");
    else
        snprintf(found, sizeof found, "'%c'", spec[pos]);
    snprintf(err, errlen, "stack spec column %zu: expected %s, found %s", pos + 1, expected,
             found);
    return -EINVAL;
}

static size_t skip_ws(const char *s, size_t pos)
{
    while (s[pos] == ' ' || s[pos] == '\t')
        pos++;
    return pos;
}

static int is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* Parses "(args)" at spec[*pos] == '(' into item->args. */
static int parse_args(const char *spec, size_t *pos, struct spec_item *item, char *err,
                      size_t errlen)
{
    size_t start = skip_ws(spec, *pos + 1), end = start, len;

    while (spec[end] && spec[end] != ')' && spec[end] != '(' && spec[end] != '>') {
        if (iscntrl((unsigned char)spec[end]))
            return fail(err, errlen, spec, end, "printable argument text");
        end++;
    }
    if (spec[end] != ')')
        return fail(err, errlen, spec, end, "')'");
    len = end - start;
    while (len && (spec[start + len - 1] == ' ' || spec[start + len - 1] == '\t'))
        len--;
    if (len >= IOSTACK_ARGS_MAX) {
        snprintf(err, errlen, "stack spec column %zu: arguments longer than %d bytes",
                 start + 1, IOSTACK_ARGS_MAX - 1);
        return -EINVAL;
    }
    memcpy(item->args, spec + start, len);
    item->args[len] = '\0';
    *pos = end + 1;
    return 0;
}

int spec_parse(const char *spec, struct spec_item *items, int max_items, char *err, size_t errlen)
{
    size_t pos = skip_ws(spec, 0);
    int n = 0;

    if (spec[pos] == '\0')
        return 0;
    for (;;) {
        size_t start = pos;
        struct spec_item *item;
        int rc;

        while (is_name_char(spec[pos]))
            pos++;
        if (pos == start)
            return fail(err, errlen, spec, pos, "a filter name");
        if (n == max_items) {
            snprintf(err, errlen, "stack spec column %zu: more than %d filters", start + 1,
                     max_items);
            return -EINVAL;
        }
        if (pos - start >= IOSTACK_NAME_MAX) {
            snprintf(err, errlen, "stack spec column %zu: filter name too long", start + 1);
            return -EINVAL;
        }
        item = &items[n++];
        memcpy(item->name, spec + start, pos - start);
        item->name[pos - start] = '\0';
        item->args[0] = '\0';
        pos = skip_ws(spec, pos);
        if (spec[pos] == '(') {
            rc = parse_args(spec, &pos, item, err, errlen);
            if (rc)
                return rc;
            pos = skip_ws(spec, pos);
        }
        if (spec[pos] == '\0')
            return n;
        if (spec[pos] != '>')
            return fail(err, errlen, spec, pos, "'>' or '('");
        pos = skip_ws(spec, pos + 1);
    }
}
