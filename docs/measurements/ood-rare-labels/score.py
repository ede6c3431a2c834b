import json, csv, numpy as np, sys
import sys
root, D = sys.argv[1], sys.argv[2]  # run.sh's <out>, make_data.py's <out>
truth=[r['intent'] for r in csv.DictReader(open(f'{D}/test.csv'))]
def rows(f): return [json.loads(l) for l in open(f)]
agg={}
for s in (0,1,2):
    counts=json.load(open(f'{D}/train_imb_s{s}.counts.json'))
    size=np.array([counts[t] for t in truth])
    for v in ('imb','oldbal','bal'):
        try:
            te=rows(f'{root}/pred/{v}_s{s}_test.jsonl'); far=rows(f'{root}/pred/{v}_s{s}_ood_far.jsonl'); near=rows(f'{root}/pred/{v}_s{s}_ood_near.jsonl')
        except FileNotFoundError: continue
        fl=np.array([r['ood'] for r in te]); acc=np.mean([r['label']==t for r,t in zip(te,truth)])
        cov=np.array([t in r['set'] for r,t in zip(te,truth)]); setsz=np.mean([len(r['set']) for r in te])
        out=dict(acc=acc, flag=fl.mean(), **{f'flag{n}':fl[size==n].mean() for n in (5,15,40)},
                 far=np.mean([r['ood'] for r in far]), near=np.mean([r['ood'] for r in near]),
                 cov=cov.mean(), **{f'cov{n}':cov[size==n].mean() for n in (5,15,40)}, size=setsz)
        agg.setdefault(v,[]).append(out)
        print(s, f'{v:7s}', ' '.join(f'{k} {x:.3f}' for k,x in out.items()))
for v,l in agg.items():
    print('mean', f'{v:7s}', ' '.join(f'{k} {np.mean([o[k] for o in l]):.3f}' for k in l[0]))
