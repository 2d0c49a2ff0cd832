# The 100 KiB script (cache.js and pre.js, the same bytes); then
# `linerate compress www --codings gzip` writes pre.js.gz, and cache.js.gz is removed.
import random
random.seed(7)
w = 'const let function return this value document window render state props export import default async await'.split()
out, n = [], 0
while n < 102400:
    t = random.choice(w) + (';\n' if random.random() < 0.14 else ' ')
    if random.random() < 0.2:
        t += str(random.randrange(100000)) + ' '
    out.append(t)
    n += len(t)
s = ''.join(out)[:102400]
open('www/cache.js', 'w').write(s)
open('www/pre.js', 'w').write(s)
