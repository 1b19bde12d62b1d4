/*
 * iscsi-rw: block I/O on an iSCSI LUN from userspace (libiscsi), for
 * checking filtered volumes end to end where no kernel initiator exists.
 *
 *   iscsi-rw [-i INITIATOR-IQN] read  iscsi://HOST:PORT/IQN/LUN OFFSET LENGTH > data
 *   iscsi-rw [-i INITIATOR-IQN] write iscsi://HOST:PORT/IQN/LUN OFFSET        < data
 *   iscsi-rw [-i INITIATOR-IQN] size  iscsi://HOST:PORT/IQN/LUN
 *
 * OFFSET and LENGTH must be multiples of the LUN's block size. Writes end
 * with SYNCHRONIZE CACHE. CHAP credentials come from libiscsi's
 * LIBISCSI_CHAP_USERNAME / LIBISCSI_CHAP_PASSWORD (not argv); the initiator
 * name defaults to iqn.2026-11.org.iostack:iscsi-rw.
 */
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

static struct iscsi_context *iscsi;
static int lun;

static void die(const char *what)
{
    fprintf(stderr, "iscsi-rw: %s: %s\n", what, iscsi ? iscsi_get_error(iscsi) : "");
    exit(1);
}

static int ok(struct scsi_task *task)
{
    return task && task->status == SCSI_STATUS_GOOD;
}

static void connect_url(const char *initiator, const char *url_text)
{
    struct iscsi_url *url;

    iscsi = iscsi_create_context(initiator);
    if (!iscsi)
        die("context");
    url = iscsi_parse_full_url(iscsi, url_text);
    if (!url)
        die("url");
    iscsi_set_targetname(iscsi, url->target);
    iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
    lun = url->lun;
    if (iscsi_full_connect_sync(iscsi, url->portal, lun) != 0)
        die("login");
    iscsi_destroy_url(url);
}

static void capacity(uint32_t *block, uint64_t *blocks)
{
    struct scsi_task *task = iscsi_readcapacity16_sync(iscsi, lun);
    struct scsi_readcapacity16 *rc16;

    if (!ok(task) || !(rc16 = scsi_datain_unmarshall(task)))
        die("read capacity");
    *block = rc16->block_length;
    *blocks = rc16->returned_lba + 1;
    scsi_free_scsi_task(task);
}

static void do_read(uint64_t off, uint64_t len, uint32_t block)
{
    while (len) {
        uint32_t n = len > CHUNK ? CHUNK : (uint32_t)len;
        struct scsi_task *task =
            iscsi_read16_sync(iscsi, lun, off / block, n, (int)block, 0, 0, 0, 0, 0);
        if (!ok(task) || task->datain.size != (int)n)
            die("read");
        if (fwrite(task->datain.data, 1, n, stdout) != n)
            die("stdout");
        scsi_free_scsi_task(task);
        off += n;
        len -= n;
    }
}

static void do_write(uint64_t off, uint32_t block)
{
    unsigned char *buf = malloc(CHUNK);
    size_t n;

    while ((n = fread(buf, 1, CHUNK, stdin)) > 0) {
        struct scsi_task *task;
        if (n % block) {
            fprintf(stderr, "iscsi-rw: input is not a multiple of %u bytes\n", block);
            exit(1);
        }
        task = iscsi_write16_sync(iscsi, lun, off / block, buf, (uint32_t)n, (int)block, 0, 0,
                                  0, 0, 0);
        if (!ok(task))
            die("write");
        scsi_free_scsi_task(task);
        off += n;
    }
    {
        struct scsi_task *task = iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0);
        if (!ok(task))
            die("synchronize cache");
        scsi_free_scsi_task(task);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    const char *initiator = "iqn.2026-11.org.iostack:iscsi-rw";
    uint32_t block;
    uint64_t blocks, off;

    if (argc > 2 && strcmp(argv[1], "-i") == 0) {
        initiator = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 3 || (strcmp(argv[1], "size") && argc < 4) ||
        (strcmp(argv[1], "read") == 0 && argc < 5)) {
        fprintf(stderr, "usage: iscsi-rw [-i INITIATOR] read URL OFFSET LENGTH | "
                        "write URL OFFSET | size URL\n");
        return 2;
    }
    connect_url(initiator, argv[2]);
    capacity(&block, &blocks);
    if (strcmp(argv[1], "size") == 0) {
        printf("%llu %u\n", (unsigned long long)(blocks * block), block);
    } else {
        off = strtoull(argv[3], NULL, 0);
        if (off % block) {
            fprintf(stderr, "iscsi-rw: offset is not a multiple of %u\n", block);
            return 1;
        }
        if (strcmp(argv[1], "read") == 0)
            do_read(off, strtoull(argv[4], NULL, 0), block);
        else
            do_write(off, block);
    }
    iscsi_logout_sync(iscsi);
    iscsi_destroy_context(iscsi);
    return 0;
}
