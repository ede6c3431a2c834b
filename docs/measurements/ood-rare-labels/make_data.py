# The practitioner's task of docs/RESULTS.md sections 1 and 4: 13 Banking77 intents renamed / merged, balanced
# (15 rows per label) and imbalanced (5 / 40 / 15 rows) training files, a 420-row test file, 100 far and 100
# near off-topic texts. Usage: python make_data.py <shared data folder> <out folder>
import json, random, csv, collections, sys, os
B=os.path.join(sys.argv[1], 'Banking77Classification')
M=os.path.join(sys.argv[1], 'MassiveScenarioClassification')
O=sys.argv[2]
MAP={'card_arrival':'card_delivery','card_delivery_estimate':'card_delivery',  # merged
 'lost_or_stolen_card':'lost_card','change_pin':'pin_change','pin_blocked':'pin_locked',
 'exchange_rate':'fx_rate','card_payment_wrong_exchange_rate':'fx_wrong_on_card',
 'top_up_failed':'topup_failed','pending_top_up':'topup_pending','terminate_account':'close_account',
 'transfer_timing':'transfer_time','request_refund':'refund','age_limit':'age_req',
 'declined_card_payment':'card_declined'}
def rd(p): return [json.loads(l) for l in open(p)]
tr=rd(B+'/train.jsonl'); te=rd(B+'/test.jsonl')
pool=collections.defaultdict(list)
for r in tr:
    if r['label_text'] in MAP: pool[MAP[r['label_text']]].append(r['text'])
def write(path, rows):
    with open(path,'w',newline='') as f:
        w=csv.writer(f); w.writerow(['utterance','intent']); w.writerows(rows)
labels=sorted(pool)
for seed in (0,1,2):
    rng=random.Random(seed)
    rows=[(t,l) for l in labels for t in rng.sample(pool[l],15)]
    rng.shuffle(rows); write(f'{O}/train_s{seed}.csv', rows)
    # imbalanced: first 4 labels 5 rows, rest: 40 for 4, 15 for others
    rng=random.Random(100+seed); lab=labels[:]; rng.shuffle(lab)
    n={l:(5 if i<4 else 40 if i<8 else 15) for i,l in enumerate(lab)}
    rows=[(t,l) for l in labels for t in rng.sample(pool[l],n[l])]
    rng.shuffle(rows); write(f'{O}/train_imb_s{seed}.csv', rows)
    json.dump(n, open(f'{O}/train_imb_s{seed}.counts.json','w'))
# test: 30 per source intent from official test
rng=random.Random(7); bys=collections.defaultdict(list)
for r in te:
    if r['label_text'] in MAP: bys[r['label_text']].append(r['text'])
rows=[(t,MAP[k]) for k in sorted(bys) for t in rng.sample(bys[k],30)]
rng.shuffle(rows); write(O+'/test.csv', rows)
# far OOD: massive scenario test texts
ms=rd(M+'/test.jsonl'); rng.shuffle(ms)
far=[r['text'] for r in ms if r['label_text'] in ('alarm','weather','iot','music','cooking','play')][:100]
open(O+'/ood_far.txt','w').write('\n'.join(far)+'\n')
# near OOD: other banking intents test texts
near=[r['text'] for r in te if r['label_text'] not in MAP]; rng.shuffle(near)
open(O+'/ood_near.txt','w').write('\n'.join(near[:100])+'\n')
print(labels, len(labels))
