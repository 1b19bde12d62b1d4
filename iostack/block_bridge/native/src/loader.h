/* Loads a private instance of one filter .so for one stack. */
#ifndef IOSTACK_LOADER_H
#define IOSTACK_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "spec.h"

struct filter_inst {
    char name[IOSTACK_NAME_MAX];
    void *handle;
    int memfd;
    /* Konnector's void transforms, or NULL where the error-returning
     * iostack_* ones (preferred when exported) are bound. */
    void (*write_xform)(void *, unsigned long, unsigned long, bool *);
    void (*read_xform)(void *, unsigned long, unsigned long);
    int (*write_xform_rc)(void *, unsigned long, unsigned long, bool *);
    int (*read_xform_rc)(void *, unsigned long, unsigned long);
    int (*pre_read)(void *, unsigned long, unsigned long, unsigned int, bool *);
    int (*stats)(char *, size_t);
    void (*release)(void);
    unsigned int alignment;
    bool thread_safe;
    bool reads_device;
};

/* Loads dir/<item->name>.so privately and passes item->args to it. */
int filter_load(struct filter_inst *f, const char *dir, const struct spec_item *item, char *err,
                size_t errlen);
void filter_unload(struct filter_inst *f);

#endif
