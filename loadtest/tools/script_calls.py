#!/usr/bin/env python3
"""The Lua script calls one short run sent to Redis, from `redis-cli MONITOR`
output: one line per distinct script (by SHA), for loadtest/bench's
redis-benchmark ceilings.

    script_calls.py MONITOR_FILE OUT_DIR ORDER_PREFIX

For each script: OUT_DIR/<sha>.args holds the last call's arguments after
the SHA (numkeys, keys, argv), NUL-separated, with every order id that
starts with ORDER_PREFIX turned into ORDER_PREFIX__rand_int__ so that
redis-benchmark -r sends a new order at each call; OUT_DIR/<sha>.lua the
script text when it came by EVAL. Prints "calls<TAB>sha" per script, most
called first.
"""
import hashlib
import os
import re
import sys

# MONITOR quotes each argument with sdscatrepr: \" \\ \n \r \t \a \b \xHH
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
ESC = {'n': b'\n', 'r': b'\r', 't': b'\t', 'a': b'\a', 'b': b'\b', '"': b'"', '\\': b'\\'}


def unquote(s):
    out, i = bytearray(), 0
    while i < len(s):
        c = s[i]
        if c == '\\' and i + 1 < len(s):
            n = s[i + 1]
            if n == 'x' and i + 3 < len(s):
                out.append(int(s[i + 2:i + 4], 16))
                i += 4
                continue
            out += ESC.get(n, n.encode())
            i += 2
            continue
        out += c.encode('latin-1', 'replace')
        i += 1
    return bytes(out)


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    mon, outdir, prefix = argv[1], argv[2], argv[3].encode()
    calls, last, text = {}, {}, {}
    rand = re.compile(re.escape(prefix) + rb'[0-9]+')
    with open(mon, encoding='latin-1') as f:
        for line in f:
            args = [unquote(a) for a in ARG.findall(line)]
            if len(args) < 3 or args[0].upper() not in (b'EVAL', b'EVALSHA'):
                continue
            if args[0].upper() == b'EVAL':
                sha = hashlib.sha1(args[1]).hexdigest()
                text[sha] = args[1]
            else:
                sha = args[1].decode('ascii', 'replace').lower()
            calls[sha] = calls.get(sha, 0) + 1
            last[sha] = [rand.sub(prefix + b'__rand_int__', a) for a in args[2:]]
    os.makedirs(outdir, exist_ok=True)
    for sha in sorted(calls, key=lambda s: -calls[s]):
        with open(os.path.join(outdir, sha + '.args'), 'wb') as f:
            f.write(b''.join(a + b'\0' for a in last[sha]))
        if sha in text:
            with open(os.path.join(outdir, sha + '.lua'), 'wb') as f:
                f.write(text[sha])
        print(f'{calls[sha]}\t{sha}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
