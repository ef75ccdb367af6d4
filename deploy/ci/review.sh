#!/bin/sh
# review.sh: a CI review step for prchat. It runs a review of a pull request
# with Claude Code or Codex in the job's checkout (read-only), then records
# the review with prchat together with the agent's session file, so that
# questions about the review are answered by the session that wrote it
# after the runner is gone.
#
# Settings (environment):
#   PRCHAT_SERVER   prchat's URL (required)
#   PRCHAT_TOKEN    an admin token limited to the repository (prchat token
#                   create --scope admin --repo OWNER/NAME); never passed on
#                   to the agent
#   REVIEW_BACKEND  claude-code or codex (required)
#   REVIEW_REPO     OWNER/NAME as registered in prchat (required)
#   REVIEW_PR       the pull request's number (required)
#   REVIEW_BASE     the base commit SHA (required); the head is the
#                   checkout's HEAD, which must be the PR's head commit
#   REVIEW_DIR      the checkout (default: the current directory)
#   REVIEW_MODEL    the model (default: the CLI's)
#   REVIEW_INSTRUCTIONS  more instructions for the reviewer (optional)
#   REVIEW_OUT      where review.md and the agent's output go (default: a
#                   new temporary directory)
#   PRCHAT_BIN, CLAUDE_BIN, CODEX_BIN  the commands (default: prchat,
#                   claude, codex)
# The agent CLIs take their own settings (ANTHROPIC_API_KEY,
# CLAUDE_CONFIG_DIR; OPENAI_API_KEY, CODEX_HOME, ...) from the environment.
set -eu

fail() {
	echo "review.sh: $*" >&2
	exit 1
}

[ -n "${PRCHAT_SERVER:-}" ] || fail "set PRCHAT_SERVER to prchat's URL"
[ -n "${REVIEW_REPO:-}" ] || fail "set REVIEW_REPO to the repository (OWNER/NAME)"
[ -n "${REVIEW_PR:-}" ] || fail "set REVIEW_PR to the pull request's number"
[ -n "${REVIEW_BASE:-}" ] || fail "set REVIEW_BASE to the base commit SHA"
backend=${REVIEW_BACKEND:-}
case $backend in
claude-code | codex) ;;
*) fail "set REVIEW_BACKEND to claude-code or codex (not \"$backend\")" ;;
esac
prchat=${PRCHAT_BIN:-prchat}
model=${REVIEW_MODEL:-}

# The token is for prchat alone: the agent reads untrusted text (the PR)
# and never sees it.
token=${PRCHAT_TOKEN:-}
unset PRCHAT_TOKEN

cd "${REVIEW_DIR:-.}"
dir=$(pwd -P)
head=$(git rev-parse HEAD)
git cat-file -e "$REVIEW_BASE^{commit}" 2>/dev/null ||
	fail "the base commit $REVIEW_BASE is not in the checkout (fetch it, e.g. fetch-depth: 0)"
out=${REVIEW_OUT:-$(mktemp -d)}
mkdir -p "$out"

# The prompt goes in on standard input: a diff can be longer than one
# command-line argument may be.
{
	echo "Review pull request #$REVIEW_PR of $REVIEW_REPO: the change from $REVIEW_BASE to $head,"
	echo "checked out in the current directory. Read the code it touches, then write your review"
	echo "as markdown: what the change does, and each problem you found with the file and lines."
	echo "Do not change any file."
	if [ -n "${REVIEW_INSTRUCTIONS:-}" ]; then
		echo
		echo "$REVIEW_INSTRUCTIONS"
	fi
	echo
	echo "The change (git diff --stat, then the diff; a long diff is cut):"
	git diff --stat "$REVIEW_BASE" "$head"
	git diff "$REVIEW_BASE" "$head" | head -c 200000
} >"$out/prompt.txt"

case $backend in
claude-code)
	# The session id is chosen up front; its file is then
	# <config>/projects/<the checkout, munged>/<id>.jsonl.
	session=$(uuidgen 2>/dev/null || cat /proc/sys/kernel/random/uuid)
	session=$(printf %s "$session" | tr 'A-F' 'a-f')
	set -- -p --session-id "$session" --output-format text --max-turns "${REVIEW_MAX_TURNS:-40}"
	[ -z "$model" ] || set -- "$@" --model "$model"
	"${CLAUDE_BIN:-claude}" "$@" --permission-mode dontAsk --tools Read,Grep,Glob <"$out/prompt.txt" >"$out/review.md"
	state=${CLAUDE_CONFIG_DIR:-$HOME/.claude}
	file=
	for f in "$state"/projects/*/"$session".jsonl; do
		[ -f "$f" ] && file=$f
	done
	;;
codex)
	set -- exec --json -s read-only -C "$dir" -o "$out/review.md"
	[ -z "$model" ] || set -- "$@" -m "$model"
	"${CODEX_BIN:-codex}" "$@" - <"$out/prompt.txt" >"$out/events.jsonl"
	session=$(grep -o '"thread_id":"[0-9a-fA-F-]*"' "$out/events.jsonl" | head -n 1 | cut -d '"' -f 4)
	[ -n "$session" ] || fail "codex started no session (see $out/events.jsonl)"
	state=${CODEX_HOME:-$HOME/.codex}
	file=
	for f in "$state"/sessions/*/*/*/rollout-*-"$session".jsonl; do
		[ -f "$f" ] && file=$f
	done
	;;
esac
[ -s "$out/review.md" ] || fail "the $backend review is empty"
[ -n "$file" ] || fail "no session file of $backend session $session under $state"

set -- review record --repo "$REVIEW_REPO" --pr "$REVIEW_PR" --base "$REVIEW_BASE" \
	--backend "$backend" --session-id "$session" --session-file "$file" \
	--run-dir "$dir" --markdown-file "$out/review.md"
[ -z "$model" ] || set -- "$@" --model "$model"
PRCHAT_TOKEN=$token "$prchat" "$@"
