/*
 * libiostack: a stack of block filters over one backing file descriptor.
 *
 * A stack is built from a spec such as "xor(key=0x5a)>bitrev>iops(read=500)":
 * the leftmost filter is the top (nearest the initiator). Writes run
 * write_xform top to bottom, then go to the device; reads ask pre_read top
 * to bottom, read the device if nobody answered, then run read_xform bottom
 * to top. Every function returning int returns 0 or a negative errno.
 */
#ifndef IOSTACK_STACK_H
#define IOSTACK_STACK_H

#include <stddef.h>
#include <stdint.h>

#define IOSTACK_MAX_FILTERS 16
#define IOSTACK_ERRLEN 256

typedef struct iostack_stack iostack_stack;

/* Build a stack over backing_fd (not owned: the caller closes it). On
 * failure returns NULL and writes the reason to err. */
iostack_stack *iostack_open(const char *spec, const char *filter_dir, int backing_fd,
                            char *err, size_t errlen);

/* Check a spec by loading every filter and passing its arguments, without
 * any device. 0 when the spec would open; else -EINVAL/-ENOENT and err. */
int iostack_validate(const char *spec, const char *filter_dir, char *err, size_t errlen);

int iostack_read(iostack_stack *s, void *buf, size_t cnt, uint64_t offset);
int iostack_write(iostack_stack *s, const void *buf, size_t cnt, uint64_t offset);
int iostack_flush(iostack_stack *s);
void iostack_close(iostack_stack *s);

/* Introspection, for frontends and tests. */
int iostack_depth(const iostack_stack *s);
const char *iostack_filter_name(const iostack_stack *s, int index);
unsigned int iostack_stack_alignment(const iostack_stack *s);
/* 1 when the stack runs one request at a time (a filter is not thread safe). */
int iostack_serialized(const iostack_stack *s);
int iostack_filter_stats(iostack_stack *s, int index, char *out, size_t outlen);

#endif
