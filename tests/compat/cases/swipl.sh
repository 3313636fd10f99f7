# A Prolog with its own stacks and garbage collector, linked with gperftools' tcmalloc, whose mmap,
# munmap and mremap hooks make their calls with syscall(): 1.5 M integers mapped, sorted and
# summed, 300 000 terms key-sorted, two threads building lists, joined.
description="swipl: 1.5M-element msort, 300k-term keysort, two threads"
packages=(swi-prolog-nox)
program="swipl"
nobody=yes
cost=15
prepare() {
  cat >"$IN/lists.pl" <<'PROLOG'
:- initialization(main, main).
main :-
  numlist(1, 1500000, L), maplist([X, Y]>>(Y is (X * 7919) mod 1000003), L, M),
  msort(M, S), sum_list(S, Sum), length(S, N),
  findall(K-V, (between(1, 300000, I), K is I mod 997, V = f(I, [I, I])), KVs),
  keysort(KVs, Sorted), last(Sorted, Last),
  thread_create(numlist(1, 500000, _), T1, []), thread_create(numlist(1, 500000, _), T2, []),
  thread_join(T1, _), thread_join(T2, _),
  format("~w ~w ~w~n", [Sum, N, Last]).
PROLOG
}
command=(swipl "$IN/lists.pl")
