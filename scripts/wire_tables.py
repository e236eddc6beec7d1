#!/usr/bin/env python3
"""Byte-offset tables of the wire formats, generated from their headers.

The `visit` field list of each message is its wire layout (src/proto/codec.h): fields in
that order, little-endian, no padding. Five sections: the control messages
(src/proto/messages.h), the connection manager's (src/proto/cm_messages.h), the
host-to-host headers (src/proto/host_wire.h), the express lines' (src/proto/express_wire.h)
and Pingmesh's probes (src/proto/pingmesh_wire.h).
`wire_tables.py` prints both; `wire_tables.py --check docs/wire-protocol.md` fails if any
generated section of the doc differs.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = {'uint8_t': 1, 'uint16_t': 2, 'uint32_t': 4, 'int32_t': 4, 'uint64_t': 8, 'Gid': 16,
         'Name': 32, 'LongName': 64, 'SandboxId': 128}
SOURCES = {'control': 'src/proto/messages.h', 'cm': 'src/proto/cm_messages.h',
           'host': 'src/proto/host_wire.h', 'express': 'src/proto/express_wire.h',
           'pingmesh': 'src/proto/pingmesh_wire.h'}
END = '<!-- END GENERATED -->'


def begin(section):
    return f'<!-- BEGIN GENERATED: wire_tables.py {section} -->'


def parse(src):
    constants = dict(re.findall(r'constexpr \w+ (\w+) = (\d+);', src))
    src = re.sub(r'std::array<(\w+), (\w+)>\s+(\w+)',
                 lambda a: f'{a.group(1)} {a.group(3)}[{constants.get(a.group(2), a.group(2))}]', src)
    structs, declared = {}, {}
    # A struct may derive from one declared before it (QpAttr : QpCoreAttr): its visit list
    # then names members of both.
    for m in re.finditer(r'struct (\w+)(?: : (\w+))? \{(.*?)\n\};', src, re.S):
        name, base, body = m.group(1), m.group(2), m.group(3)
        members = dict(declared.get(base, {}))
        members.update({d.group(2): d.group(1) + (d.group(3) or '')
                        for d in re.finditer(r'^\s+(\w+)\s+(\w+)(\[\d+\])?(?:\{\}|\s*=\s*[^;]+)?;',
                                             body, re.M)})
        declared[name] = members
        v = re.search(r'void visit\(V&& ?v?\) \{\s*(.*?)\s*\}', body, re.S)
        order = re.findall(r'v\((\w+)\)', v.group(1)) if v else []
        structs[name] = [(f, members[f]) for f in order]
    return structs


def tables(structs, names):
    def size(t):
        array = re.fullmatch(r'(\w+)\[(\d+)\]', t)
        if array:
            return size(array.group(1)) * int(array.group(2))
        return SIZES[t] if t in SIZES else sum(size(tt) for _, tt in structs[t])

    def rows(name, base=0, prefix=''):
        out, off = [], base
        for f, t in structs[name]:
            if t in structs:
                out += rows(t, off, prefix + f + '.')
            else:
                out.append((off, size(t), prefix + f))
            off += size(t)
        return out

    lines = []
    for name in names:
        if not structs[name]:
            continue
        r = rows(name)
        lines += [f'#### {name} ({sum(x[1] for x in r)} bytes)', '', '| Offset | Size | Field |',
                  '|---|---|---|']
        lines += [f'| {off} | {sz} | {f} |' for off, sz, f in r]
        lines.append('')
    return '\n'.join(lines)


def generated(section):
    own = parse((ROOT / SOURCES[section]).read_text())
    # Structs of the control section may appear inside another section's (cm's QpAttr).
    known = {**parse((ROOT / SOURCES['control']).read_text()), **own}
    return tables(known, list(own))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == '--check':
        doc = Path(sys.argv[2]).read_text()
        for section in SOURCES:
            start = doc.index(begin(section)) + len(begin(section))
            found = doc[start:doc.index(END, start)].strip()
            if found != generated(section).strip():
                print(f'{sys.argv[2]}: section "{section}" is out of date: '
                      f'run scripts/wire_tables.py and paste its output')
                return 1
        print('wire tables match ' + ' and '.join(SOURCES.values()))
        return 0
    for section in SOURCES:
        print(begin(section))
        print(generated(section))
        print(END)
        print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
