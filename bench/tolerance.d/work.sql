-- work.sql — the sqlite3 program of bench/tolerance: a table of a few
-- thousand rows built by a recursive query, an index, joins, grouping and
-- string functions; printed results.
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, v REAL);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 5000)
INSERT INTO t SELECT i, (i * 7919) % 97, printf('name-%05d-%s', i, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26, 1 + i % 7)), (i * 31 % 1000) / 10.0 FROM c;
CREATE INDEX tk ON t(k);
SELECT k, count(*), round(sum(v), 1), min(name), max(name) FROM t GROUP BY k ORDER BY k LIMIT 20;
SELECT a.id, b.id, a.name || '/' || b.name FROM t a JOIN t b ON a.k = b.k AND b.id = a.id + 97 ORDER BY a.id LIMIT 15;
SELECT group_concat(name, ',') FROM (SELECT name FROM t WHERE k = 5 ORDER BY name DESC LIMIT 30);
SELECT count(*), sum(length(name)), avg(v) FROM t WHERE name LIKE '%-c%';
UPDATE t SET name = upper(name) WHERE id % 3 = 0;
SELECT substr(group_concat(name, ''), 1, 200) FROM (SELECT name FROM t ORDER BY name LIMIT 400);
