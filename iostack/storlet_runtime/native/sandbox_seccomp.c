/*
 * Writes the seccomp program of the Storlets sandbox (classic BPF, the form
 * bwrap's --seccomp FD takes) to the file named by argv[1].
 *
 * Everything is allowed except system calls a filter never needs and that
 * reach past the sandbox's namespaces: debugging other processes (ptrace,
 * process_vm_*), mounts and the root (mount, umount2, pivot_root, chroot,
 * fsopen...), the kernel keyring (keyctl, add_key, request_key), BPF and
 * perf, kernel modules and kexec, new namespaces (unshare, setns),
 * userfaultfd, and handles to files by inode. They fail with EPERM.
 * clone3 fails with ENOSYS: its flags (CLONE_NEW*) sit in memory a classic
 * BPF filter cannot read, and ENOSYS makes the C library fall back to
 * clone, whose flags the kernel's own --disable-userns check and the
 * missing capabilities already bound (EPERM would fail every new thread).
 * A system call of any other
 * architecture (say, 32-bit calls from a 64-bit process) kills the process:
 * their numbers differ and would slip past the list.
 *
 * Built and run by this directory's Makefile; needs libseccomp-dev.
 */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const denied[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "unshare", "setns",
    "userfaultfd", "open_by_handle_at", "name_to_handle_at",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
    "iopl", "ioperm", "lookup_dcookie", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT.bpf\n", argv[0]);
        return 2;
    }
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL || seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0) {
        fprintf(stderr, "seccomp_init failed\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not a system call on this architecture */
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (rc != 0) {
            fprintf(stderr, "cannot deny %s: %s\n", denied[i], strerror(-rc));
            return 1;
        }
    }
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0) {
        fprintf(stderr, "cannot answer clone3 with ENOSYS\n");
        return 1;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || seccomp_export_bpf(ctx, fd) != 0 || close(fd) != 0) {
        perror(argv[1]);
        return 1;
    }
    seccomp_release(ctx);
    return 0;
}
