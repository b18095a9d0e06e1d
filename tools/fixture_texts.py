"""Random text for the tokenizer fixtures' golden files: `count` strings of 1..`max_parts` parts,
each a character drawn from one of `pools` (code point ranges) or, 15 % of the time, one of
`extras` (whitespace runs, contractions, chat tokens: the pre-tokenizer's edge cases)."""


def random_texts(rng, count, max_parts, pools, extras):
    out = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, max_parts)):
            if rng.random() < 0.15:
                chars.append(rng.choice(extras))
            else:
                lo, hi = rng.choice(pools)
                chars.append(chr(rng.randint(lo, hi)))
        out.append("".join(chars))
    return out
