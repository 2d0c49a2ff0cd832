#!/bin/bash
# 2 workers, 200 HTTP/3 connections for 60 s, with RELOADS reloads (one each 5 s)
L=${L:-/tmp/v/hand}; RELOADS=${1:-10}; OUT=${2:-/tmp/mr/out}
mkdir -p $OUT
$L serve /tmp/mr/root --listen 127.0.0.1:25080 --tls-listen 127.0.0.1:25443 --tls-cert /tmp/lrcert.pem --tls-key /tmp/lrkey.pem \
  --http3 on --workers 2 --status-path /.s --access-log off > $OUT/serve.log 2>&1 &
S=$!
sleep 1
curl -s http://127.0.0.1:25080/.s > $OUT/before.json
( for i in $(seq 1 $RELOADS); do sleep 5; kill -HUP $S; done ) &
R=$!
$L bench http --h3 --insecure -c 200 -d 60 --json https://127.0.0.1:25443/1K.bin https://127.0.0.1:25443/100K.bin > $OUT/bench.json 2> $OUT/bench.err
wait $R
curl -s http://127.0.0.1:25080/.s > $OUT/after.json
kill -TERM $S; wait $S
grep -c "reloaded (generation" $OUT/serve.log
python3 - $OUT <<'PY'
import json,sys
d=sys.argv[1]
a=json.load(open(d+'/after.json'))['http3']; b=json.load(open(d+'/before.json'))['http3']
print({k:a[k]-b.get(k,0) for k in a if isinstance(a[k],(int,float))})
j=json.load(open(d+'/bench.json'))
r=j if 'requests' in j else j.get('result',j)
print({k:r[k] for k in r if k in ('requests','requests_per_second','errors','failed','non_2xx','connections_opened','reconnects')})
PY
