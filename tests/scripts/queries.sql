-- SQLite over the imported records (table t: key, n, x, words): indexes,
-- joins, grouping, window functions, recursive CTEs, updates and deletes.
.mode list
.headers off
CREATE TABLE w AS
  WITH RECURSIVE split(key, rest, word) AS (
    SELECT key, words || ' ', '' FROM t
    UNION ALL
    SELECT key, substr(rest, instr(rest, ' ') + 1), substr(rest, 1, instr(rest, ' ') - 1)
    FROM split WHERE rest <> ''
  )
  SELECT key, lower(word) AS word FROM split WHERE word <> '';
CREATE INDEX w_word ON w(word);
CREATE INDEX t_key ON t(key);
SELECT count(*), count(DISTINCT word) FROM w;
SELECT word, count(*) AS c, sum(t.n) FROM w JOIN t USING (key) GROUP BY word ORDER BY c DESC, word LIMIT 30;
SELECT substr(key, 1, 1) AS k, count(*), round(avg(x), 3), min(n), max(n) FROM t GROUP BY k ORDER BY k;
SELECT key, n, rank() OVER (PARTITION BY substr(key, 1, 1) ORDER BY n DESC) AS r FROM t ORDER BY r, key LIMIT 40;
UPDATE t SET words = upper(words) || ' ' || words WHERE n % 7 = 0;
DELETE FROM t WHERE n % 5 = 0;
SELECT count(*), sum(length(words)), group_concat(substr(key, 8, 1), '') FROM (SELECT * FROM t ORDER BY key LIMIT 500);
SELECT a.key, b.key FROM t AS a JOIN t AS b ON substr(a.key, 1, 4) = substr(b.key, 1, 4) AND a.key < b.key ORDER BY a.key, b.key LIMIT 40;
VACUUM;
PRAGMA integrity_check;
