# A bash workload: indexed and associative arrays, parameter expansion,
# subshells, command substitution, pipelines, here-documents, functions and
# recursion.  Reads the data file given as $1 (the first 1000 lines).
set -u

declare -A freq=()
declare -a keys=() lens=()
n=0
while IFS=$'\t' read -r key num dec words; do
	((++n > 1000)) && break
	keys+=("$key")
	lens+=("${#words}")
	for w in $words; do
		freq[$w]=$((${freq[$w]:-0} + 1))
	done
done <"$1"

fib() {
	local k=$1
	if ((k < 2)); then
		echo "$k"
	else
		echo $(($(fib $((k - 1))) + $(fib $((k - 2)))))
	fi
}

echo "records ${#keys[@]} words ${#freq[@]}"
echo "fib $(fib 6)"

# Parameter expansion.
s="The quick brown fox jumps over the lazy dog"
echo "${s^^}" "${s,,}" "${s//o/0}" "${s:4:11}" "${s#* }" "${s%% *}" "${#s}"
arr=($s)
echo "${arr[@]:2:3}" "${#arr[@]}" "${arr[-1]}" "${arr[*]^}"
joined=$(
	IFS=+
	echo "${lens[*]:0:20}"
)
echo "joined $joined = $((joined))"

# Subshells do not leak changes; command substitution collects output.
counter=1
(counter=99; freq[subshell]=1; echo "inside $counter ${#freq[@]}")
echo "outside $counter ${freq[subshell]:-unset}"
upper=$(for k in "${keys[@]:0:50}"; do printf '%s\n' "${k^^}"; done | sort -r | head -n 5 | tr '\n' ' ')
echo "upper $upper"

# Sorted associative array dump, built in a pipeline.
for w in "${!freq[@]}"; do
	printf '%s %d\n' "$w" "${freq[$w]}"
done | sort -k2,2nr -k1,1 | head -n 25

# Here-document and read loop with string building.
acc=""
while read -r a b c; do
	acc+="${c}${b}${a};"
	printf -v line '%-8s|%5s|%s' "$a" "$b" "${c:-none}"
	echo "$line"
done <<DOC
one 1 uno
two 2 dos
three 3
$(printf 'gen %d x\n' 4 5 6)
DOC
echo "acc $acc"

# Many small arrays created and dropped.
total=0
for ((i = 0; i < 40; i++)); do
	local_arr=($(seq $((i % 17)) $((i % 17 + 5))))
	unset 'local_arr[2]'
	total=$((total + ${#local_arr[@]} + ${local_arr[0]}))
	declare -A tmp=([a$i]=$i [b$i]=$((i * 2)))
	total=$((total + ${tmp[b$i]}))
	unset tmp
done
echo "total $total"
