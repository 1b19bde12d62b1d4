/* Entry points of the Konnector-ABI sample filter. */
#include <stdbool.h>

int pass_args(char *raw_arg_list);
char *get_name();
void write_xform(void *buf, unsigned long cnt, unsigned long offset, bool *doWrite);
void read_xform(void *buf, unsigned long cnt, unsigned long offset);
int pre_read(void *buf, unsigned long cnt, unsigned long int offset, unsigned int fdesc,
             bool *doRead);
