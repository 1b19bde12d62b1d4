/* Stack spec parser: "name(args)>name>..." -> items, top first. */
#ifndef IOSTACK_SPEC_H
#define IOSTACK_SPEC_H

#include <stddef.h>

#define IOSTACK_NAME_MAX 64
#define IOSTACK_ARGS_MAX 512

struct spec_item {
    char name[IOSTACK_NAME_MAX];
    char args[IOSTACK_ARGS_MAX];
};

/* Returns the number of items (0 for an empty spec) or -EINVAL with a
 * message naming the 1-based column of the problem. */
int spec_parse(const char *spec, struct spec_item *items, int max_items, char *err, size_t errlen);

#endif
