package pgdocstore

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/docstore/driver"
	"gocloud.dev/gcerrors"
)

// maxQueryRows bounds how many documents one query reads: the iterator
// holds them in memory, so that no connection stays checked out between
// calls of Next.
const maxQueryRows = 100_000

// RunGetQuery implements driver.Collection.RunGetQuery. The query runs as
// one statement bounded by the statement timeout; its rows (at most
// maxQueryRows, else ResourceExhausted) are read before it returns.
//
// Filters compare like memdocstore: numbers by value whatever their Go
// type, strings by bytes (COLLATE "C"), times by instant; a document whose
// field has another type, or lacks it, does not match.
func (c *collection) RunGetQuery(ctx context.Context, q *driver.Query) (driver.DocumentIterator, error) {
	if q.BeforeQuery != nil {
		if err := q.BeforeQuery(func(any) bool { return false }); err != nil {
			return nil, err
		}
	}
	sql, args, err := c.querySQL(q)
	if err != nil {
		return nil, err
	}
	qctx, cancel := c.bound(ctx)
	defer cancel()
	rows, err := c.pool.Query(qctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var results []storedRow
	for rows.Next() {
		var r storedRow
		if err := rows.Scan(&r.rev, &r.raw); err != nil {
			return nil, err
		}
		results = append(results, r)
		if len(results) > maxQueryRows {
			return nil, errorf(gcerrors.ResourceExhausted, nil, "pgdocstore: query matches more than %d documents; add a filter or a limit", maxQueryRows)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fps := q.FieldPaths
	if len(fps) > 0 && c.opts.KeyFunc == nil {
		fps = append([][]string{{c.opts.KeyField}}, fps...)
	}
	return &iterator{c: c, rows: results, fps: fps}, nil
}

type storedRow struct {
	rev *int64
	raw []byte
}

// QueryPlan implements driver.Collection.QueryPlan: the SQL text.
func (c *collection) QueryPlan(q *driver.Query) (string, error) {
	sql, _, err := c.querySQL(q)
	return sql, err
}

// querySQL builds a query's statement and arguments.
func (c *collection) querySQL(q *driver.Query) (string, []any, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	for _, f := range q.Filters {
		cond, err := filterSQL(f, arg)
		if err != nil {
			return "", nil, err
		}
		where = append(where, cond)
	}
	var b strings.Builder
	b.WriteString("SELECT revision, doc FROM " + c.table)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	if q.OrderByField != "" {
		e, err := pathSQL([]string{q.OrderByField})
		if err != nil {
			return "", nil, err
		}
		dir := " DESC"
		if q.OrderAscending {
			dir = " ASC"
		}
		fmt.Fprintf(&b, " ORDER BY (CASE WHEN jsonb_typeof(%[1]s) = 'number' THEN (%[1]s)::numeric END)%[2]s,"+
			` (CASE WHEN jsonb_typeof(%[1]s) = 'string' THEN %[1]s #>> '{}' END) COLLATE "C"%[2]s,`+
			" (%[1]s ->> '%[3]s')%[2]s, key", e, dir, tagTime)
	}
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + arg(q.Limit))
	}
	if q.Offset > 0 {
		b.WriteString(" OFFSET " + arg(q.Offset))
	}
	return b.String(), args, nil
}

// pathSQL is the SQL expression of the JSONB value at fp, written with
// literals (not parameters) so that it matches an expression index.
func pathSQL(fp []string) (string, error) {
	var b strings.Builder
	b.WriteString("doc")
	for _, k := range fp {
		if !storable(k) {
			return "", errorf(gcerrors.InvalidArgument, nil, "pgdocstore: field name %q holds a NUL or invalid UTF-8", k)
		}
		b.WriteString(" -> '" + strings.ReplaceAll(escapeKey(k), "'", "''") + "'")
	}
	return b.String(), nil
}

// filterSQL writes one filter as a condition; arg adds a parameter.
func filterSQL(f driver.Filter, arg func(any) string) (string, error) {
	e, err := pathSQL(f.FieldPath)
	if err != nil {
		return "", err
	}
	switch f.Op {
	case driver.EqualOp:
		j, err := filterJSON(f.Value)
		if err != nil {
			return "", err
		}
		// JSONB equality compares numbers by value and other scalars
		// exactly, and never matches across types.
		return e + " = " + arg(j) + "::jsonb", nil
	case "in", "not-in":
		v := reflect.ValueOf(f.Value)
		list := make([]string, v.Len())
		for i := range list {
			if list[i], err = filterJSON(v.Index(i).Interface()); err != nil {
				return "", err
			}
		}
		cond := e + " = ANY (" + arg(list) + "::text[]::jsonb[])"
		if f.Op == "not-in" {
			return "(" + e + " IS NOT NULL AND NOT " + cond + ")", nil
		}
		return cond, nil
	case "<", "<=", ">", ">=":
	default:
		return "", errorf(gcerrors.InvalidArgument, nil, "pgdocstore: unknown filter operator %q", f.Op)
	}
	switch v := f.Value.(type) {
	case time.Time:
		u := v.UTC()
		if u.Year() < 0 || u.Year() > 9999 {
			return "", errorf(gcerrors.InvalidArgument, nil, "pgdocstore: time %v is outside years 0 to 9999", v)
		}
		return fmt.Sprintf("(%s ->> '%s') %s %s::text", e, tagTime, f.Op, arg(u.Format(timeLayout))), nil
	}
	rv := reflect.ValueOf(f.Value)
	switch rv.Kind() {
	case reflect.String:
		return fmt.Sprintf(`(jsonb_typeof(%[1]s) = 'string' AND (%[1]s #>> '{}') COLLATE "C" %[2]s %[3]s::text)`, e, f.Op, arg(rv.String())), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return numberSQL(e, f.Op, strconv.FormatInt(rv.Int(), 10), arg), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return numberSQL(e, f.Op, strconv.FormatUint(rv.Uint(), 10), arg), nil
	case reflect.Float32, reflect.Float64:
		x := rv.Float()
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", errorf(gcerrors.InvalidArgument, nil, "pgdocstore: cannot compare with %v", x)
		}
		return numberSQL(e, f.Op, strconv.FormatFloat(x, 'f', -1, 64), arg), nil
	}
	return "", errorf(gcerrors.InvalidArgument, nil, "pgdocstore: cannot compare with a %T", f.Value)
}

func numberSQL(e, op, n string, arg func(any) string) string {
	return fmt.Sprintf("(jsonb_typeof(%[1]s) = 'number' AND (CASE WHEN jsonb_typeof(%[1]s) = 'number' THEN (%[1]s)::numeric END) %[2]s %[3]s::numeric)", e, op, arg(n))
}

// filterJSON is the stored JSON text of a filter value.
func filterJSON(v any) (string, error) {
	tree, err := encodeValue(v)
	if err != nil {
		return "", err
	}
	raw, err := marshal(tree)
	if err != nil {
		return "", err
	}
	return string(raw), nil
}

// iterator walks the rows a query read.
type iterator struct {
	c    *collection
	rows []storedRow
	fps  [][]string
}

// Next implements driver.DocumentIterator.Next.
func (it *iterator) Next(_ context.Context, doc driver.Document) error {
	if len(it.rows) == 0 {
		return io.EOF
	}
	r := it.rows[0]
	it.rows = it.rows[1:]
	return it.c.decodeInto(r.raw, r.rev, doc, it.fps)
}

// Stop implements driver.DocumentIterator.Stop.
func (it *iterator) Stop() { it.rows = nil }

// As implements driver.DocumentIterator.As; there is nothing to expose.
func (it *iterator) As(any) bool { return false }
