"""The figures `colibri perplexity` prints, parsed for the integration tests (miss_drop.sh,
standin.sh): perplexity, the comparison with a reference run (--kl-memory / --kl-divergence)
and, with a pool, the expert store's line. A line that is absent leaves its keys out."""
import re


def parse(path):
    s = open(path).read()
    r = {"ppl": float(re.search(r"^perplexity: ([0-9.]+) ", s, re.M).group(1))}
    m = re.search(r"^(\w+) reference: perplexity (\S+) \(([-+0-9.]+) %\); KL divergence mean (\S+) max (\S+); "
                  r"argmax agreement ([0-9.]+) %", s, re.M)
    if m:
        r.update(ref_kind=m.group(1), ref=float(m.group(2)), kl=float(m.group(4)), kl_max=float(m.group(5)),
                 agree=float(m.group(6)), kl_text=m.group(4) + " " + m.group(5))
    m = re.search(r"^experts: pool (\d+) slots .*; hit rate ([0-9.]+) % .*; ([0-9]+) bytes read per token; "
                  r".*dropped (\d+) of (\d+) selections .*; stand-ins (\d+) ", s, re.M)
    if m:
        r.update(slots=int(m.group(1)), hit=float(m.group(2)), bytes=int(m.group(3)), dropped=int(m.group(4)),
                 selections=int(m.group(5)), standins=int(m.group(6)))
    return r
