#!/usr/bin/python3
# Deterministic input data for the compatibility cases (tests/compat/cases/*.sh): the same
# seed gives the same bytes on every machine (Python's Mersenne Twister, random.Random(seed)).
# Usage: gen.py KIND SEED COUNT > FILE
#   lines  N lines "KEY VALUE", KEY 20 random hex digits, VALUE a few random words
#   csv    N records "id,word,number,word" (sort by a column)
#   text   about N words of Zipf-distributed vocabulary, 12 words a line (compressible prose)
#   json   a JSON array of N objects {"id","k","v","tags"} (for jq)
import random
import signal
import sys


def vocabulary(rng, n=6000):
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [12, 9, 8, 7, 7, 6, 6, 6, 5, 4, 4, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    words = set()
    while len(words) < n:
        words.add("".join(rng.choices(letters, weights, k=rng.randint(2, 11))))
    words = sorted(words)
    rng.shuffle(words)
    cum, total = [], 0.0
    for i in range(len(words)):
        total += 1.0 / (i + 1)
        cum.append(total)
    return words, cum


def main():
    kind, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    out = sys.stdout
    words, cum = vocabulary(rng)
    chunk = 20000
    if kind == "lines":
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            keys = rng.randbytes(10 * n).hex()
            ws = rng.choices(words, cum_weights=cum, k=3 * n)
            out.write("".join(f"{keys[20 * i:20 * i + 20]} {ws[3 * i]} {ws[3 * i + 1]} {ws[3 * i + 2]}\n"
                              for i in range(n)))
    elif kind == "csv":
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            ws = rng.choices(words, cum_weights=cum, k=2 * n)
            out.write("".join(f"{start + i},{ws[2 * i]},{rng.randrange(10**9)},{ws[2 * i + 1]}\n"
                              for i in range(n)))
    elif kind == "text":
        per_line = 12
        for start in range(0, count, chunk * per_line):
            n = min(chunk * per_line, count - start)
            ws = rng.choices(words, cum_weights=cum, k=n)
            out.write("".join(" ".join(ws[i:i + per_line]) + "\n" for i in range(0, n, per_line)))
    elif kind == "json":
        out.write("[\n")
        for i in range(count):
            tags = rng.choices(words, cum_weights=cum, k=rng.randint(0, 4))
            tag_list = ",".join(f'"{t}"' for t in tags)
            sep = "," if i + 1 < count else ""
            out.write(f'{{"id":{i},"k":"{rng.choice(words[:500])}","v":{rng.randrange(10**6)},'
                      f'"tags":[{tag_list}]}}{sep}\n')
        out.write("]\n")
    else:
        sys.exit(f"gen.py: unknown kind {kind}")


if __name__ == "__main__":
    # A reader that has what it wants (`gen.py text ... | head -c N`) ends the output quietly,
    # as for any other generator in a pipeline, not with a BrokenPipeError traceback.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
