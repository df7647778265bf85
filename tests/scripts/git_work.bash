# git at work: a repository built from the data file ($2) in a fresh
# directory ($1), with fixed identities and dates so every object id is
# reproducible.  Commits, branches, a merge, diff, log, blame, gc (packing
# with two threads), fsck and archive.
set -eu
dir=$1 data=$2
export GIT_AUTHOR_NAME=Tester GIT_AUTHOR_EMAIL=tester@example.org
export GIT_COMMITTER_NAME=Tester GIT_COMMITTER_EMAIL=tester@example.org
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=$dir
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"

when() { export GIT_AUTHOR_DATE="2020-01-0$1T12:00:00Z" GIT_COMMITTER_DATE="2020-01-0$1T12:00:00Z"; }

git init -q -b main repo
cd repo
git config gc.auto 0
when 1
split -l 2000 -d "$data" part.
git add part.*
git commit -q -m "import $(ls part.* | wc -l) parts"

when 2
git checkout -q -b edits
sed -i 's/alpha/ALPHA/g' part.00 part.03
git rm -q part.05
git commit -q -am "edit and remove"

when 3
git checkout -q main
sed -i '1~7d' part.01
printf 'new line %d\n' $(seq 1 500) >>part.02
git commit -q -am "trim and extend"

when 4
git merge -q --no-edit edits
git tag -a v1 -m "tagged"

git log --format='%H %an %ad %s' --date=iso-strict --stat
git diff --stat HEAD~2 HEAD
git diff HEAD~1 HEAD -- part.00 | head -n 60
git blame -s part.02 | tail -n 5
git -c pack.threads=2 gc -q --aggressive
git fsck --full --strict
git count-objects -v | grep -E '^(count|in-pack|packs)'
git rev-list --objects --all | sort
git archive --format=tar v1 | sha256sum
git cat-file -p v1 | head -n 6
