#!/usr/bin/env python3
"""Regenerates syscall_table_kernel.txt, the kernel's view of the x86-64 system calls that
KernelAccessTable.MatchesTheKernelsSyscallList (kernel_access_test.cc) checks syscall_table.cc
against.

usage: (head -2 src/uffd/syscall_table_kernel.txt; syscall_table_extract.py LINUX_TREE) > new.txt
(the two header lines name the kernel version the list came from).

For every entry of arch/x86/entry/syscalls/syscall_64.tbl with ABI common or 64 it prints
"<nr> <name> ni" (no entry point: the call always fails with ENOSYS) or
"<nr> <name> <nargs> <indices>", where <indices> lists the 0-based arguments whose type in the
prototype (include/linux/syscalls.h, or SYSCALL_DEFINEn in arch/x86 for the arch-only calls)
carries __user, or "-" when none does. Preprocessor conditionals are evaluated for x86-64 as far
as they matter here (the 32-bit CLONE_BACKWARDS and SPLIT_ARG64 variants are false).
"""
import os
import re
import sys

# Configuration symbols that are off on x86-64 and choose a different prototype when on.
FALSE = {'CONFIG_CLONE_BACKWARDS', 'CONFIG_CLONE_BACKWARDS2', 'CONFIG_CLONE_BACKWARDS3',
         'CONFIG_ARCH_SPLIT_ARG64'}
# Typedefs of user pointers used in prototypes without a visible __user.
USER_TYPEDEFS = {'cap_user_header_t', 'cap_user_data_t'}


def preprocess(text):
    out, stack = [], []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r'#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)', s)
        if not m:
            if all(stack):
                out.append(line)
            continue
        d, rest = m.group(1), m.group(2)
        names = set(re.findall(r'CONFIG_\w+', rest))
        if d in ('ifdef', 'if'):
            stack.append(not (names & FALSE))
        elif d == 'ifndef':
            stack.append(True)
        elif d in ('elif', 'else'):
            stack[-1] = not stack[-1]
        elif d == 'endif':
            stack.pop()
    return '\n'.join(out)


def strip_comments(s):
    return re.sub(r'/\*.*?\*/', '', s, flags=re.S)


def main():
    root = sys.argv[1]
    protos = {}
    hdr = preprocess(strip_comments(open(os.path.join(root, 'include/linux/syscalls.h')).read()))
    for m in re.finditer(r'asmlinkage\s+long\s+(sys_\w+)\s*\((.*?)\)\s*;', hdr, re.S):
        args = m.group(2).strip()
        protos.setdefault(m.group(1), [] if args == 'void' else [a.strip() for a in args.split(',')])
    # Entry points that only arch code declares (mmap, modify_ldt, arch_prctl, rt_sigreturn, iopl).
    for sub in ('arch/x86/kernel', 'arch/x86/entry'):
        for dirpath, _, files in os.walk(os.path.join(root, sub)):
            for f in sorted(files):
                if not f.endswith('.c'):
                    continue
                text = strip_comments(open(os.path.join(dirpath, f), errors='replace').read())
                for m in re.finditer(r'SYSCALL_DEFINE(\d)\(\s*(\w+)\s*(.*?)\)\s*\{', text, re.S):
                    n, name, rest = int(m.group(1)), m.group(2), m.group(3)
                    parts = [p.strip() for p in rest.split(',')][1:]
                    protos.setdefault('sys_' + name,
                                      [parts[2 * i] + ' ' + parts[2 * i + 1] for i in range(n)])
    for line in open(os.path.join(root, 'arch/x86/entry/syscalls/syscall_64.tbl')):
        line = line.split('#')[0].strip()
        if not line:
            continue
        f = line.split()
        nr, abi, name = int(f[0]), f[1], f[2]
        entry = f[3] if len(f) > 3 else ''
        if abi not in ('common', '64'):
            continue
        if not entry or entry == 'sys_ni_syscall':
            print(f'{nr} {name} ni')
            continue
        if entry not in protos:
            # An out-of-tree addition (a fork's own system call): not part of Linux.
            print(f'syscall_table_extract: skipping {nr} {name}: no prototype for {entry}',
                  file=sys.stderr)
            continue
        args = protos[entry]
        users = [str(i) for i, a in enumerate(args)
                 if '__user' in a or set(re.findall(r'\w+', a)) & USER_TYPEDEFS]
        print(f'{nr} {name} {len(args)} {",".join(users) if users else "-"}')


if __name__ == '__main__':
    main()
