# A functional language's runtime: the OCaml toplevel builds a hash table of 2 million boxed
# strings; its minor and major collectors scan and move them.
description="ocaml: toplevel script, Hashtbl of 2M strings, folded"
packages=(ocaml-nox)
program="ocaml"
cost=18
prepare() {
  cat >t.ml <<'ML'
let h = Hashtbl.create 16;;
for i = 0 to 2000000 do Hashtbl.add h i (string_of_int i) done;;
Printf.printf "%d\n" (Hashtbl.fold (fun _ v a -> a + String.length v) h 0);;
ML
}
command=(ocaml "$IN/t.ml")
