# A sandbox: bubblewrap runs python_fork's multiprocessing job in a pid namespace and a user
# namespace of its own (what Flatpak does), /proc remounted there. Its processes' pids name
# other processes outside, so they join uswap run's job as guests, named by the supervisor.
# Python is the namespace's pid 1 (--as-pid-1), so that bwrap waits for it and GNU time's peak
# is Python's (a reaper of bwrap's own in between passed on none of its children's usage).
source "$(dirname "${BASH_SOURCE[0]}")/python_fork.sh"  # prepare() and case_env
description="bwrap --unshare-pid --unshare-user python3 multiprocessing (fork), /proc its own"
packages=(bubblewrap python3)
program="bwrap (python3 in a pid namespace)"
nobody=yes
pool=
command=(/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --bind "$IN" "$IN"
         --unshare-pid --unshare-user --as-pid-1 --die-with-parent /usr/bin/python3 "$IN/mp.py")
