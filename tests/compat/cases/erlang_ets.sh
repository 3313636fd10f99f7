# A runtime with allocators of its own (BEAM's carriers), four schedulers on two cores and a
# per-process heap collector: four Erlang processes fill one ETS table with 300 000 strings,
# then a map of as many more is built and everything is summed.
description="erlang: 4 processes fill an ETS table, a map of 300k strings, summed"
packages=(erlang-base)
program="erl (beam.smp, 4 schedulers)"
cost=4
prepare() {
  cat >t.erl <<'ERL'
-module(t).
-export([main/0]).
main() ->
    N = 300000,
    T = ets:new(t, [set, public]),
    Ws = [spawn_monitor(fun() ->
                            [ets:insert(T, {X, integer_to_list(X * 7)}) || X <- lists:seq(K, N, 4)]
                        end) || K <- [1, 2, 3, 4]],
    [receive {'DOWN', _, _, _, normal} -> ok end || _ <- Ws],
    M = maps:from_list([{X, lists:reverse(integer_to_list(X))} || X <- lists:seq(1, N)]),
    S = lists:sum([length(V) || {_, V} <- ets:tab2list(T)]) +
        lists:sum([length(V) || V <- maps:values(M)]),
    io:format("~p ~p ~p~n", [ets:info(T, size), maps:size(M), S]),
    halt(0).
ERL
}
command=(bash -c 'erlc "$IN/t.erl" && exec erl -noshell +S 4:4 -s t main')
