# GHC's runtime (pandoc is Haskell): a heap of megablocks it maps itself, a copying collector
# that walks all of it at each major collection. 2.5 MB of Markdown (sections, emphasis, links,
# tables, nested lists) converted to HTML on stdout.
description="pandoc (GHC's runtime): 2.5 MB of Markdown with tables and lists to HTML"
packages=(pandoc)
program="pandoc"
nobody=yes
cost=20
prepare() {
  python3 - <<'PY'
import random
random.seed(7)
words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
with open("doc.md", "w") as f:
    for s in range(700):
        f.write(f"# Section {s}\n\n")
        for p in range(4):
            f.write(" ".join(random.choice(words) for _ in range(120)) +
                    f" *emph* **strong** `code` [link](http://x/{p})\n\n")
        f.write("| a | b | c |\n|---|---|---|\n" +
                "".join(f"| {i} | {i * i} | {random.choice(words)} |\n" for i in range(10)) + "\n")
        f.write("- item one\n- item two\n  - nested\n\n")
PY
}
command=(pandoc "$IN/doc.md" -t html)
