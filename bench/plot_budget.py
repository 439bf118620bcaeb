#!/usr/bin/python3
"""plot_budget.py SWEEP.TSV OUT.SVG MODEL_BYTES — decode tokens/s against the memory budget
(columns of SWEEP.TSV: percent, budget bytes, tok/s, hit rate, bytes read/token), as a
hand-written SVG (no plotting library needed)."""
import sys


def main():
    rows = [l.split("\t") for l in open(sys.argv[1]) if l.strip()]
    pts = [(int(r[0]), float(r[2]), float(r[3])) for r in rows]
    model_gb = int(sys.argv[3]) / 1e9
    W, H, L, R, T, B = 640, 400, 70, 60, 40, 60
    ymax = max(p[1] for p in pts) * 1.15 or 1
    x = lambda pct: L + (pct - 0) / 100 * (W - L - R)
    y = lambda v: H - B - v / ymax * (H - T - B)
    yh = lambda h: H - B - h * (H - T - B)
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" text-anchor="middle" font-size="13">Colibri decode tok/s vs memory budget '
         '(Mixtral-8x7B dims, 4 layers, q4_0, %.2f GB)</text>' % (W / 2, model_gb)]
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (W - R, T, W - R, H - B))
    for pct in range(0, 101, 10):
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>' % (x(pct), H - B, x(pct), H - B + 5))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%d%%</text>' % (x(pct), H - B + 18, pct))
    for i in range(6):
        v = ymax * i / 5
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, y(v), W - R, y(v)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (L - 6, y(v) + 4, v))
        o.append('<text x="%d" y="%.1f" fill="#c60">%d%%</text>' % (W - R + 6, yh(i / 5) + 4, 20 * i))
    o.append('<text x="%d" y="%d" text-anchor="middle">memory budget (%% of the model file)</text>' % (W / 2, H - 20))
    o.append('<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">decode tokens/s</text>' % (H / 2, H / 2))
    o.append('<text x="%d" y="%d" transform="rotate(90 %d %d)" text-anchor="middle" fill="#c60">expert hit rate</text>'
             % (W - 14, H / 2, W - 14, H / 2))
    o.append('<polyline fill="none" stroke="#06c" stroke-width="2" points="%s"/>' %
             " ".join("%.1f,%.1f" % (x(p), y(v)) for p, v, _ in pts))
    o.append('<polyline fill="none" stroke="#c60" stroke-dasharray="4 3" points="%s"/>' %
             " ".join("%.1f,%.1f" % (x(p), yh(h)) for p, _, h in pts))
    for p, v, _ in pts:
        o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#06c"/>' % (x(p), y(v)))
    o.append('</svg>')
    open(sys.argv[2], "w").write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
