# The file effects of issue 39, one line each: run in a fresh directory
# holding src.tar (100 files under src/), a file `gone` and a file `moved`.
# Under diehard every line must come out right and every effect happen
# once (tests/files.bats checks the directory afterwards).
set -u
seq 1 20000 >out.txt
echo "write-then-read $(wc -l <out.txt)"
echo line >>app.log
echo "append $(wc -l <app.log)"
sqlite3 t.db "create table if not exists t(x); insert into t values(1);"
echo "sqlite3 $(sqlite3 t.db 'select count(*) from t')"
python3 -c 'import sqlite3
c = sqlite3.connect("p.db")
c.execute("create table if not exists t(x)")
c.execute("insert into t values(1)")
c.commit()
print("python-sqlite3", c.execute("select count(*) from t").fetchone()[0])'
mkdir g && (cd g && git init -q && echo hi >f && git add f &&
	git -c user.email=ci@example.org -c user.name=ci commit -qm one && echo "git $(git log --oneline | wc -l)")
mkdir mk && printf 'int main(void) { return 0; }\n' >mk/m.c && printf 'm: m.c\n\tcc -o m m.c\n' >mk/Makefile &&
	make -s -C mk && mk/m && echo "make ok"
mkdir x && tar -xf src.tar -C x && echo "tar $(ls x/src | wc -l)"
mkdir d1 && echo "mkdir ok"
rm gone && echo "rm ok"
mv moved moved2 && echo "mv ok"
flock lockf -c 'echo flock ok'
# Every replica is pid 2: the same name in each, once in the real /tmp.
sort -r out.txt >"${TMPDIR:-/tmp}/diehard-file-cases.$$" && echo "pid-named $(wc -l <"${TMPDIR:-/tmp}/diehard-file-cases.$$")"
