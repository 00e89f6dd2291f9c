"""cost_model_transfer_summary.py OUTDIR — the tables of bench/cost_model_transfer.sh's logs
(OUTDIR/<workload>/<variant>_s<seed>.json, 65-record runs): per variant and seed the trial
at which best-so-far reached 90 % of the best kernel of any run (never = 66), and, robust to
the load of a shared machine changing between runs, the same on the speed-up over the run's
own default schedule (trial 1, measured in the same run), with the median speed-up at
trials 16, 32 and 65. Runs with another record count are left out."""
import json, os, statistics, sys
base = sys.argv[1] if len(sys.argv) > 1 else 'bench/out/transfer'
def secs(path, trials=65):
    out = []
    for line in open(path):
        r = json.loads(line)
        runs = r.get("run_secs") or []
        ok = r.get("error") is None and r.get("verified") and runs
        out.append((sum(runs)/len(runs) if ok else None, r.get("trace_hash")))
    return out[:trials]
for d in sorted(os.listdir(base)):
    logs = {}
    for f in os.listdir(os.path.join(base, d)):
        if f.endswith('.json') and f != 'summary.json':
            v, s = f[:-5].rsplit('_s', 1)
            c = secs(os.path.join(base, d, f))
            if len(c) == 65: logs[(v, s)] = c
    firsts = set(c[0][1] for c in logs.values())
    dh = firsts.pop() if len(firsts) == 1 else None
    runs = {k: [None if h == dh else x for x, h in c] for k, c in logs.items()}
    ref = min(x for c in runs.values() for x in c if x)
    def t90(c):
        best = float('inf')
        for i, x in enumerate(c):
            if x is not None: best = min(best, x)
            if best <= ref / 0.9: return i + 1
        return 66
    print(d, 'ref %.4g s' % ref)
    for v in sorted(set(k[0] for k in logs)):
        ss = sorted(s for (vv, s) in logs if vv == v)
        ts = [t90(runs[(v, s)]) for s in ss]
        fin = [ref / min(x for x in runs[(v, s)] if x) for s in ss]
        print('  %-16s seeds %-10s t90 %-22s median %5.1f  final/ref median %.3f' % (v, ','.join(ss), ' '.join('never' if t > 65 else str(t) for t in ts), statistics.median(ts), statistics.median(fin)))

print('\n-- load-normalised: speed over the same run\'s default schedule (trial 1) --')
for d in sorted(os.listdir(base)):
    logs = {}
    for f in os.listdir(os.path.join(base, d)):
        if f.endswith('.json') and f != 'summary.json':
            v, s = f[:-5].rsplit('_s', 1)
            c = secs(os.path.join(base, d, f))
            if len(c) == 65 and c[0][0]: logs[(v, s)] = c
    def curve(c):  # speedup over the run's default, best so far, per trial (trial 1 excluded)
        base0, best, out = c[0][0], float('inf'), [0.0]
        for x, h in c[1:]:
            if x: best = min(best, x)
            out.append(base0 / best if best < float('inf') else 0.0)
        return out
    cur = {k: curve(c) for k, c in logs.items()}
    ref = max(max(c) for c in cur.values())
    print(d, 'best speedup over default in any run %.2fx' % ref)
    for v in sorted(set(k[0] for k in logs)):
        ss = sorted(s for (vv, s) in logs if vv == v)
        ts = [next((i + 1 for i, y in enumerate(cur[(v, s)]) if y >= 0.9 * ref), 66) for s in ss]
        at = lambda k: statistics.median(cur[(v, s)][k - 1] for s in ss)
        print('  %-16s seeds %-10s t90 %-24s median %5.1f | median speedup at trial 16 %.2fx, 32 %.2fx, 65 %.2fx' % (v, ','.join(ss), ' '.join('never' if t > 65 else str(t) for t in ts), statistics.median(ts), at(16), at(32), at(65)))
