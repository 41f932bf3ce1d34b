/*
 * args: the command line's tables, and the one parser that reads them.
 *
 * Each command describes its options once (struct args_opt): the parser
 * builds getopt_long's tables from it, `gpugate completion` generates the
 * shell completion from it, and a mistake is told from it: one line that
 * says what is wrong, with the nearest known name where one is close
 * (text_nearest_consider()), and "run 'gpugate CMD --help'" instead of
 * the whole help.  Exit status 2 for every usage error (SPEC section 7).
 */
#ifndef GPUGATE_ARGS_H
#define GPUGATE_ARGS_H

#include <getopt.h>
#include <stdio.h>

/* The exit status of a usage error, for every command. */
#define ARGS_USAGE_ERROR 2

/* What an option or an operand takes, for completion. */
enum args_value {
	ARGS_NONE,  /* a flag */
	ARGS_WORD,  /* a name, a number: nothing to complete */
	ARGS_FILE,  /* a file (or directory) */
	ARGS_DIR,   /* a directory */
	ARGS_CHOICE /* one of choices */
};

struct args_opt {
	const char *name;           /* the long name, without "--" */
	char letter;                /* the short form, or 0 */
	int val;                    /* what args_next() returns for it */
	enum args_value value;
	const char *const *choices; /* ARGS_CHOICE: the values, NULL-ended */
};

struct args_call;

struct args_command {
	const char *name;    /* "explain" */
	const char *summary; /* one line for gpugate --help */
	int (*run)(const struct args_call *call, int argc, char **argv);
	void (*usage)(FILE *out);
	const struct args_opt *opts;        /* ended by {NULL}; NULL for none */
	enum args_value operands;           /* what the operands are */
	const char *const *operand_choices; /* ARGS_CHOICE: the values */
	/* Says a usage error (the message alone) where this command's errors
	 * go; NULL: "gpugate CMD: MESSAGE; run 'gpugate CMD --help'" on
	 * stderr.  serve logs it, in its --log-format. */
	void (*report)(const char *message);
};

/*
 * What a command is run with: its own row (its options and usage, for
 * args_init()) and the table it is a row of (commands.h), which `gpugate
 * completion` reads.  Handed down by main.c, so that no command looks
 * itself up in the table that points back at it.
 */
struct args_call {
	const struct args_command *self;
	const struct args_command *all;
	size_t n_all;
};

/* The most options a command has. */
#define ARGS_MAX_OPTS 32

/* A parse of one command's argv (argv[0] is the command). */
struct args {
	const struct args_command *cmd;
	struct option longs[ARGS_MAX_OPTS + 1];
	char shorts[2 * ARGS_MAX_OPTS + 2];
};

/* Ready to parse argv for cmd (resets getopt's optind). */
void args_init(struct args *a, const struct args_command *cmd);

/*
 * The next option's val (optarg set as by getopt_long), -1 after the last
 * option (operands start at optind), or '?' after a usage error was
 * printed (an unknown or ambiguous option, a missing value).
 */
int args_next(struct args *a, int argc, char **argv);

/*
 * The index of value among the choices of the option whose val is val;
 * -1 after printing the usage error ("-o wants text, json or yaml, not
 * 'jsn' (did you mean "json"?)").
 */
int args_choice(const struct args *a, int val, const char *value);

/* The same for an operand that must be one of the command's
 * operand_choices; what names what it is ("a shell"). */
int args_operand_choice(const struct args_command *cmd, const char *what,
			const char *value);

/*
 * Prints "gpugate CMD: MESSAGE; run 'gpugate CMD --help'" on stderr (or
 * hands MESSAGE to cmd->report) and returns ARGS_USAGE_ERROR.  cmd NULL:
 * the top level ("gpugate: ...; run 'gpugate --help'").
 */
int args_usage_error(const struct args_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The name of an option for messages: "-o" when it has a letter, else
 * "--usage-store". */
const char *args_opt_label(const struct args_opt *o, char buf[64]);

#endif
