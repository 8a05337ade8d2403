package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/clicontext"
)

// contextView is a context as herald prints it: the token masked
// (clicontext.Mask), never in full.
type contextView struct {
	Name        string `json:"name"`
	Current     bool   `json:"current"`
	URL         string `json:"url"`
	Token       string `json:"token"`
	Description string `json:"description,omitempty"`
}

func (a *app) contextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"contexts", "ctx"},
		Short:   "Manage stored contexts: named deployments with their URL and token (add, use, ls, rm, show)",
		Long: `A context is a named Herald deployment: its URL and bearer token, kept in
contexts.json in herald's directory of your configuration directory
(` + "`herald context show`" + ` prints the path), readable by you alone. Choose one
for a command with --context NAME or HERALD_CONTEXT, or for every command
with 'herald context use NAME'.

--url and --token (and HERALD_URL, HERALD_TOKEN) still win over the
context's. The context's token is sent only to the context's own URL. A
token is never printed back in full: only its last four characters, and
only for a token of 16 characters or more.`,
		Example: `  herald context add local --url http://127.0.0.1:8080
  herald context add prod --url https://herald.example.com --token-stdin --description "production" < token.txt
  herald context use prod
  herald context ls
  herald --context local consumers list
  herald context show`,
	}

	var tokenStdin, use, force bool
	var description string
	add := &cobra.Command{
		Use:   "add NAME --url URL [--token TOKEN | --token-stdin]",
		Short: "Store a context (--force replaces one of the same name)",
		Long: `add stores the context NAME with --url and the token from --token or, kept
out of your shell's history, the first line of standard input
(--token-stdin). --use also makes it the current context.`,
		Args: exactArgs(1, "one context name"),
		RunE: run(func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := clicontext.CheckName(name); err != nil {
				return usageError{err}
			}
			if a.url == "" {
				return usagef("context add needs --url")
			}
			if _, err := client.New(a.url); err != nil {
				return usageError{err}
			}
			token := a.token
			if tokenStdin {
				if token != "" {
					return usagef("give --token or --token-stdin, not both")
				}
				line, err := bufio.NewReader(a.io.In).ReadString('\n')
				token = strings.TrimSpace(line)
				if token == "" {
					return usagef("--token-stdin read no token from standard input (%v)", err)
				}
			}
			f, err := a.loadContexts()
			if err != nil {
				return err
			}
			_, exists := f.Contexts[name]
			if exists && !force {
				return usagef("context %q exists: 'herald context rm %s' first, or add --force to replace it", name, name)
			}
			f.Contexts[name] = clicontext.Context{URL: a.url, Token: token, Description: description}
			if use {
				f.Current = name
			}
			if err := f.Save(); err != nil {
				return err
			}
			verb := "added"
			if exists {
				verb = "replaced"
			}
			return a.printContextChange(name, verb, f)
		}),
	}
	add.Flags().BoolVar(&tokenStdin, "token-stdin", false, "read the token from the first line of standard input")
	add.Flags().StringVar(&description, "description", "", "a note shown by 'herald context ls'")
	add.Flags().BoolVar(&use, "use", false, "make it the current context")
	add.Flags().BoolVar(&force, "force", false, "replace a context of the same name")

	var none bool
	useCmd := &cobra.Command{
		Use:               "use NAME | --none",
		Short:             "Make a context the current one, used when no --context or HERALD_CONTEXT is given",
		ValidArgsFunction: a.completeContexts,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			switch {
			case none && len(args) > 0:
				return usagef("give a context name or --none, not both")
			case !none && len(args) != 1:
				return usagef("%s takes one context name, or --none", cmd.CommandPath())
			}
			f, err := a.loadContexts()
			if err != nil {
				return err
			}
			name := ""
			if !none {
				name = args[0]
				if _, ok := f.Contexts[name]; !ok {
					return usagef("context %q does not exist; 'herald context ls' lists them", name)
				}
			}
			f.Current = name
			if err := f.Save(); err != nil {
				return err
			}
			if none {
				if a.structured() {
					return a.emit(map[string]any{"current": nil})
				}
				_, err := fmt.Fprintln(a.io.Out, "no current context")
				return err
			}
			return a.printContextChange(name, "now current", f)
		}),
	}
	useCmd.Flags().BoolVar(&none, "none", false, "use no context")

	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the stored contexts (tokens masked)",
		Args:    exactArgs(0, "no arguments"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			f, err := a.loadContexts()
			if err != nil {
				return err
			}
			views := make([]contextView, 0, len(f.Contexts))
			for _, n := range f.Names() {
				views = append(views, viewOf(n, f))
			}
			if a.structured() {
				return a.emit(views)
			}
			t := newTable(a.io.Out, "CURRENT", "NAME", "URL", "TOKEN", "DESCRIPTION")
			for _, v := range views {
				cur := ""
				if v.Current {
					cur = "*"
				}
				t.row(cur, v.Name, v.URL, dash(v.Token), dash(v.Description))
			}
			return t.flush()
		}),
	}

	rm := &cobra.Command{
		Use:               "rm NAME",
		Aliases:           []string{"remove", "delete"},
		Short:             "Remove a stored context (if it was current, no context is)",
		Args:              exactArgs(1, "one context name"),
		ValidArgsFunction: a.completeContexts,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			f, err := a.loadContexts()
			if err != nil {
				return err
			}
			name := args[0]
			if _, ok := f.Contexts[name]; !ok {
				return usagef("context %q does not exist; 'herald context ls' lists them", name)
			}
			delete(f.Contexts, name)
			if f.Current == name {
				f.Current = ""
			}
			if err := f.Save(); err != nil {
				return err
			}
			if a.structured() {
				return a.emit(map[string]any{"name": name, "removed": true})
			}
			_, err = fmt.Fprintln(a.io.Out, "removed context", name)
			return err
		}),
	}

	show := &cobra.Command{
		Use:   "show [NAME]",
		Short: "Show the URL and token in use and where each comes from, or one stored context",
		Long: `Without NAME, show says which context, URL and token a command would use
here and where each comes from (a flag, a variable, a context or the
default), and where contexts are kept. With NAME it shows that context. The
token is masked.`,
		ValidArgsFunction: a.completeContexts,
		RunE: run(func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most one context name", cmd.CommandPath())
			}
			if len(args) == 1 {
				f, err := a.loadContexts()
				if err != nil {
					return err
				}
				if _, ok := f.Contexts[args[0]]; !ok {
					return usagef("context %q does not exist; 'herald context ls' lists them", args[0])
				}
				v := viewOf(args[0], f)
				if a.structured() {
					return a.emit(v)
				}
				t := newTable(a.io.Out, "NAME", "CURRENT", "URL", "TOKEN", "DESCRIPTION")
				t.row(v.Name, fmt.Sprint(v.Current), v.URL, dash(v.Token), dash(v.Description))
				return t.flush()
			}
			u, tok, name, err := a.resolve()
			if err != nil {
				return err
			}
			_, ctxSource, _, _ := a.selectedContext()
			path, perr := clicontext.Path()
			if perr != nil {
				path = perr.Error()
			}
			out := map[string]any{"context": name, "context_source": ctxSource, "url": u.value, "url_source": u.source,
				"token": clicontext.Mask(tok.value), "token_source": tok.source, "contexts_file": path}
			if a.structured() {
				return a.emit(out)
			}
			t := newTable(a.io.Out, "SETTING", "VALUE", "FROM")
			t.row("context", dash(name), dash(ctxSource))
			t.row("url", u.value, u.source)
			t.row("token", dash(clicontext.Mask(tok.value)), tok.source)
			t.row("contexts file", path, "")
			return t.flush()
		}),
	}
	cmd.AddCommand(add, useCmd, ls, rm, show)
	return cmd
}

func viewOf(name string, f *clicontext.File) contextView {
	c := f.Contexts[name]
	return contextView{Name: name, Current: f.Current == name, URL: c.URL, Token: clicontext.Mask(c.Token), Description: c.Description}
}

// printContextChange prints the context after add or use.
func (a *app) printContextChange(name, verb string, f *clicontext.File) error {
	v := viewOf(name, f)
	if a.structured() {
		return a.emit(v)
	}
	cur := ""
	if v.Current && verb != "now current" {
		cur = " (current)"
	}
	_, err := fmt.Fprintf(a.io.Out, "context %s %s%s: %s\n", name, verb, cur, v.URL)
	return err
}

// completeContexts completes a context name for the shell.
func (a *app) completeContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	f, err := clicontext.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return f.Names(), cobra.ShellCompDirectiveNoFileComp
}
