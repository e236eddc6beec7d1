#!/usr/bin/env python3
"""Byte-offset tables of the control messages, generated from src/proto/messages.h.

The `visit` field list of each message is its wire layout (src/proto/codec.h): fields in
that order, little-endian, no padding. `wire_tables.py` prints the tables;
`wire_tables.py --check docs/wire-protocol.md` fails if the doc's generated section differs.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = {'uint8_t': 1, 'uint16_t': 2, 'uint32_t': 4, 'uint64_t': 8, 'Gid': 16, 'Name': 32}
BEGIN, END = '<!-- BEGIN GENERATED: wire_tables.py -->', '<!-- END GENERATED -->'


def parse(src):
    structs = {}
    for m in re.finditer(r'struct (\w+) \{(.*?)\n\};', src, re.S):
        name, body = m.group(1), m.group(2)
        members = {d.group(2): d.group(1)
                   for d in re.finditer(r'^\s+(\w+)\s+(\w+)(?:\{\}|\s*=\s*[^;]+)?;', body, re.M)}
        v = re.search(r'void visit\(V&& ?v?\) \{\s*(.*?)\s*\}', body, re.S)
        order = re.findall(r'v\((\w+)\)', v.group(1)) if v else []
        structs[name] = [(f, members[f]) for f in order]
    return structs


def tables(structs):
    def size(t):
        return SIZES[t] if t in SIZES else sum(size(tt) for _, tt in structs[t])

    def rows(name, base=0, prefix=''):
        out, off = [], base
        for f, t in structs[name]:
            if t in structs:
                out += rows(t, off, prefix + f + '.')
            else:
                out.append((off, SIZES[t], prefix + f))
            off += size(t)
        return out

    lines = []
    for name in structs:
        if not structs[name]:
            continue
        r = rows(name)
        lines += [f'#### {name} ({sum(x[1] for x in r)} bytes)', '', '| Offset | Size | Field |',
                  '|---|---|---|']
        lines += [f'| {off} | {sz} | {f} |' for off, sz, f in r]
        lines.append('')
    return '\n'.join(lines)


def main():
    text = tables(parse((ROOT / 'src/proto/messages.h').read_text()))
    if len(sys.argv) == 3 and sys.argv[1] == '--check':
        doc = Path(sys.argv[2]).read_text()
        section = doc[doc.index(BEGIN) + len(BEGIN):doc.index(END)].strip()
        if section != text.strip():
            print(f'{sys.argv[2]} is out of date: run scripts/wire_tables.py and paste its output')
            return 1
        print('wire tables match messages.h')
        return 0
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
