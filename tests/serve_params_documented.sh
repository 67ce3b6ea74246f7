#!/usr/bin/env bash
# README's table of rjq serve's routes ("| request | answer |") against the
# query parameters each route takes: tools/serve/routes.def, the table the
# server refuses other parameters by (query_only). Here, without a server:
# - tests/tool_serve_params.sh's ROUTES, which that test checks against the
#   server's 400 (its "takes" list, route by route), is that table's list;
# - every route (but the demo's, rjq.1's only) has a row naming its path
#   (in full, as `.../{id}/cancel`, or as `/pause` after a sibling's
#   `POST <parent>/replay`);
# - every parameter a route takes is named in that row (`name`, ?name=,
#   &name=), ?wait= in the "the same with" row below the enqueue's;
# - every ?name= / &name= the row's request cell shows is taken by one of
#   the routes the row covers (no documented parameter the server refuses).
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
exec /usr/bin/python3 - "$SRC/README.md" "$SRC/tests/tool_serve_params.sh" \
    "$SRC/tools/serve/routes.def" <<'PY'
import re, sys
readme, params_test, routes_def = sys.argv[1], sys.argv[2], sys.argv[3]

routes = [(m.group(2), m.group(3), m.group(4).split()) for m in
          re.finditer(r'ROUTE\(\s*(\w+),\s*"(\w+)",\s*"([^"]*)",\s*"([^"]*)"\s*\)',
                      open(routes_def, encoding='utf-8').read())]
assert len(routes) > 30, 'ROUTE lines not found in ' + routes_def

tested = []
inside = False
for line in open(params_test, encoding='utf-8'):
    if line.startswith('ROUTES=('):
        inside = True
        continue
    if inside and line.startswith(')'):
        break
    if inside:
        m = re.match(r'\s*"(\w+) ([^|"]*)\|([^"]*)"', line)
        assert m, 'ROUTES line not read: ' + line
        tested.append((m.group(1), m.group(2), m.group(3).split()))
assert len(tested) > 30, 'ROUTES not found in ' + params_test

rows = []  # [request cell, whole row]
in_table = False
for line in open(readme, encoding='utf-8'):
    if line.startswith('| request | answer |'):
        in_table = True
        continue
    if in_table and not line.startswith('|'):
        break
    if in_table and not line.startswith('|---'):
        cells = line.split(' | ')
        req = cells[0][2:]
        if req.startswith('the same') and rows:
            rows[-1][0] += ' ' + req
            rows[-1][1] += ' ' + line
        else:
            rows.append([req, line])
assert len(rows) > 15, 'the serve table not found in README.md'

def norm(path):
    path = path.replace('/v1/queues/pq', '/v1/queues/{q}')
    path = re.sub(r'/jobs/j1\b', '/jobs/{id}', path)
    path = re.sub(r'/batches/b1\b', '/batches/{id}', path)
    path = re.sub(r'/groups/g1\b', '/groups/{g}', path)
    return re.sub(r'/search/\$SID\b', '/search/{id}', path)

END = r'(?=[`\[?,;\s]|$)'
def covers(req, path, method):
    if re.search(re.escape(path) + END, req):
        return True
    for i in range(1, len(path)):  # `.../{id}/cancel`
        if path[i] == '/' and re.search(re.escape('...' + path[i:]) + END, req):
            return True
    parent, last = path.rsplit('/', 1)  # `/pause` after a sibling's `POST <parent>/x`
    return (re.search('`/' + re.escape(last) + END, req) is not None and
            re.search('`' + method + ' ' + re.escape(parent) + r'/[^/`\[?]+' + END, req)
            is not None)

def named(row, p):
    return re.search(r'(`%s[`=]|[?&]%s=)' % (p, p), row) is not None

bad = []
table = set((m, p, ' '.join(t)) for m, p, t in routes)
listed = set((m, norm(p), ' '.join(t)) for m, p, t in tested)
for m, p, t in sorted(table - listed):
    bad.append('%s %s (takes %r): in routes.def, not in tool_serve_params.sh\'s ROUTES' % (m, p, t))
for m, p, t in sorted(listed - table):
    bad.append('%s %s (takes %r): in tool_serve_params.sh\'s ROUTES, not in routes.def' % (m, p, t))
covered = {}  # row index -> the routes it covers
for method, path, takes in routes:
    if path.startswith('/v1/demo'):
        continue
    path = norm(path)
    hits = [i for i, (req, _) in enumerate(rows) if covers(req, path, method)]
    if not hits:
        bad.append('%s %s: no row of README\'s serve table names it' % (method, path))
        continue
    for i in hits:
        covered.setdefault(i, []).append((method, path, takes))
    for p in takes:
        if not any(named(rows[i][1], p) for i in hits):
            bad.append('%s %s takes %s: its README row does not name it' % (method, path, p))
for i, rs in sorted(covered.items()):
    takes = set(p for _, _, t in rs for p in t)
    for p in sorted(set(re.findall(r'[?&]([a-z_]+)=', rows[i][0]))):
        if p not in takes:
            bad.append('README row %r shows ?%s=, which none of its routes takes (%s)' %
                       (rows[i][0][:60], p, ', '.join('%s %s' % (m, q) for m, q, _ in rs)))
for b in bad:
    print('FAIL:', b)
print('serve_params_documented: %d routes, %d rows, %d problems' %
      (len(routes), len(rows), len(bad)))
sys.exit(1 if bad else 0)
PY
