/*
 * yamljson: one YAML (or JSON) document in memory -> one jansson value.
 *
 * `gpugate explain` reads a Pod or Job manifest that users write as YAML or
 * JSON.  JSON is YAML, so both go through the same libyaml event stream; the
 * value is built iteratively (no recursion on input depth) under hard caps.
 *
 * Input
 *   - UTF-8 text without NUL bytes (a UTF-8 byte-order mark is allowed).
 *   - JSON's surrogate-pair escapes ("\ud83d\ude00") are refused by libyaml
 *     0.2.5 ("found invalid Unicode character escape code"): such
 *     characters must be written as UTF-8, as kubectl and Go emit them.
 *   - libyaml reads U+0085 (NEL), U+2028 and U+2029 as line breaks (YAML
 *     1.1), so raw inside a quoted JSON string they are folded: NEL becomes
 *     a space, and spaces around any of them are dropped.  Lines in
 *     messages count them.  Raw DEL, C1 controls (U+0080..U+009F but NEL),
 *     U+FFFE and U+FFFF are refused ("control characters are not
 *     allowed").  Escapes ("\u2028", "\u007f") read as written in both
 *     cases.
 *   - Exactly one non-empty document (yamljson_parse_all(): any number).
 *     Empty documents (a bare "---", a trailing "---") are skipped, as
 *     kubectl does.
 *
 * Scalars (YAML 1.2 core schema, not the YAML 1.1 of sigs.k8s.io/yaml)
 *   - Quoted ('..', "..") and block (|, >) scalars are strings.
 *   - Plain scalars:
 *       null Null NULL ~ and the empty scalar    -> null
 *       true True TRUE false False FALSE         -> boolean
 *       [-+]?[0-9]+   0x[0-9a-fA-F]+   0o[0-7]+  -> integer (int64)
 *       [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)?  -> real
 *       [-+]?.inf .nan (also .Inf .INF .NaN .NAN) -> error: not in JSON
 *       anything else                            -> string
 *     So yes/no/on/off/y/n stay strings (the YAML 1.1 "Norway problem" is
 *     not reproduced), and "8080" quoted stays a string while 8080 is an
 *     integer.
 *   - One deliberate YAML 1.1 exception: a plain decimal with a leading zero
 *     whose digits are all 0-7 (0644, -0755) is octal, because Kubernetes
 *     documents `defaultMode: 0644` in YAML as octal and kubectl sends 420.
 *     Other leading-zero decimals (0128) are decimal.
 *   - An integer outside int64 is an error, not a rounded real: Kubernetes
 *     integer fields are int64 and a silently rounded value would explain
 *     the wrong object.  A float that overflows a double is an error too.
 *   - The explicit tags !!str !!int !!bool !!float !!null and the
 *     non-specific "!" (a string) are honoured on any scalar; the value must
 *     then have that type's form (!!float also takes integers).  !!map and
 *     !!seq are accepted on mappings and sequences.  Any other tag is an
 *     error.
 *   - A string holding NUL (a "\0" escape) is an error.
 *
 * Mappings
 *   - Keys must be scalars (or aliases of scalars) and are always taken as
 *     their text: `8080: x` has the key "8080", `~: x` the key "~".
 *   - A duplicate key is an error naming the key and both lines.
 *   - The merge key "<<" (plain, untagged) is supported, as kubectl
 *     supports it, with the semantics of the YAML merge-key spec: its value
 *     is a mapping or a sequence of mappings whose keys are added when
 *     absent; explicit keys of the mapping always win, wherever they are
 *     written, and an earlier mapping in the sequence wins over a later
 *     one.  Merged keys take the position of "<<".
 *
 * Anchors and aliases
 *   - Supported; an alias is a deep copy, so the result shares no subtrees
 *     and the caller may modify it.  An alias to a node that contains it is
 *     an error, as is an undefined alias.
 *   - The expanded document may hold at most YAMLJSON_MAX_NODES values
 *     (scalars, sequences and mappings, aliases counted as expanded) and
 *     YAMLJSON_MAX_TEXT bytes of text (keys and scalars, counted likewise),
 *     and nest at most YAMLJSON_MAX_DEPTH collections deep, so an alias
 *     bomb (of many nodes or of one long string) or deep nesting fails fast
 *     instead of exhausting memory or stack.  Both caps are far above any
 *     real manifest (etcd stores objects of at most 1.5 MiB).
 *
 * Errors
 *   Every error is one diag line "NAME:LINE: message" (LINE 1-based, no
 *   column), except "NAME: no document".  The messages:
 *     NAME: no document
 *     NAME:LINE: more than one document (explain reads one object)
 *     NAME:LINE: NUL byte in input
 *     NAME:LINE: invalid UTF-8 (byte 0xXX)
 *     NAME:LINE: control characters are not allowed (U+XXXX)
 *     NAME:LINE: PROBLEM (CONTEXT at line N)   libyaml syntax errors, e.g.
 *         "did not find expected key (while parsing a block mapping at
 *         line 2)"; "at line N" is left out when N is LINE
 *     NAME:LINE: duplicate key "KEY" (first at line N)
 *     NAME:LINE: mapping key must be a scalar, not a mapping|a sequence
 *     NAME:LINE: mapping key must be a scalar, not an alias of a mapping
 *         (or: of a sequence)
 *     NAME:LINE: unknown tag TAG               (TAG as !!x, !x or verbatim)
 *     NAME:LINE: tag TAG does not apply to a scalar|a mapping|a sequence
 *     NAME:LINE: "TEXT" is not a valid TAG     e.g. "abc" is not a valid !!int
 *     NAME:LINE: integer TEXT is out of range (int64)
 *     NAME:LINE: float TEXT is out of range
 *     NAME:LINE: float TEXT cannot be represented in JSON (no infinity or NaN)
 *     NAME:LINE: string contains a NUL character
 *     NAME:LINE: undefined alias *A
 *     NAME:LINE: alias *A refers to a node that contains it
 *     NAME:LINE: merge key << needs a mapping or a sequence of mappings
 *     NAME:LINE: document expands to more than 1000000 nodes
 *     NAME:LINE: document expands to more than 16777216 bytes of text
 *     NAME:LINE: nesting deeper than 256 levels
 *     NAME:LINE: out of memory
 *   Quoted user text (KEY, TEXT, TAG) is escaped and shortened to 64 bytes.
 */
#ifndef GPUGATE_YAMLJSON_H
#define GPUGATE_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

struct diag;

#define YAMLJSON_MAX_NODES 1000000
#define YAMLJSON_MAX_TEXT (16u << 20)
#define YAMLJSON_MAX_DEPTH 256

/*
 * Parses len bytes of text (need not be NUL-terminated; text may be NULL
 * when len is 0) into a new value in *out that the caller owns and releases
 * with json_decref.  name is shown in messages (a file name; NULL shows as
 * "<input>").  Returns 0, or -1 after adding one line to d; on failure *out
 * is untouched and nothing is leaked.  Floats are read with strtod, so
 * LC_NUMERIC must be "C" (gpugate never calls setlocale).  Keeps no state
 * between calls: calls on different threads are safe.
 */
int yamljson_parse(const char *name, const char *text, size_t len,
		   json_t **out, struct diag *d);

/* One document of a stream: its value and the line it starts on. */
struct yamljson_doc {
	json_t *value;
	size_t line;
};

/*
 * yamljson_parse() for a stream of documents separated by "---", as
 * kubectl reads a file: every non-empty document, in order, in a new array
 * *docs of *n entries (n >= 1) that the caller frees with
 * yamljson_docs_free().  Each document has its own anchors; the caps on
 * nodes and text hold for the whole stream.  The errors are those above,
 * but for "more than one document"; "NAME: no document" when every
 * document is empty.  On failure *docs and *n are untouched.
 */
int yamljson_parse_all(const char *name, const char *text, size_t len,
		       struct yamljson_doc **docs, size_t *n, struct diag *d);

/* Releases what yamljson_parse_all() returned.  NULL is a no-op. */
void yamljson_docs_free(struct yamljson_doc *docs, size_t n);

#endif
