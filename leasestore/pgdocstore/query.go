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

// maxQueryRows bounds how many documents an ordered query (OrderBy or
// Offset) reads: its rows are read at once and held in memory, so that no
// connection stays checked out between calls of Next.
const maxQueryRows = 100_000

// pageRows is how many documents one statement of an unordered query
// reads; the next page is read when Next has used them up.
const pageRows = 500

// RunGetQuery implements driver.Collection.RunGetQuery.
//
// A query without OrderBy or Offset reads pages of pageRows documents in
// key order (WHERE … AND key > last ORDER BY key LIMIT n), the first one
// before RunGetQuery returns and each further one when Next needs it, each
// a statement bounded by the statement timeout; no connection is held in
// between, so a query over any number of documents runs in bounded memory.
// An ordered query is one statement whose rows (at most maxQueryRows, else
// ResourceExhausted) are read before RunGetQuery returns.
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
	fps := q.FieldPaths
	if len(fps) > 0 && c.opts.KeyFunc == nil {
		fps = append([][]string{{c.opts.KeyField}}, fps...)
	}
	it := &iterator{c: c, q: q, fps: fps, paged: q.OrderByField == "" && q.Offset == 0, left: q.Limit}
	if err := it.fetch(ctx); err != nil {
		return nil, err
	}
	return it, nil
}

type storedRow struct {
	key string
	rev *int64
	raw []byte
}

// QueryPlan implements driver.Collection.QueryPlan: the SQL text (of the
// first page, for a paged query).
func (c *collection) QueryPlan(q *driver.Query) (string, error) {
	sql, _, err := c.querySQL(q, q.OrderByField == "" && q.Offset == 0, nil, q.Limit)
	return sql, err
}

// querySQL builds a query's statement and arguments. A paged query reads
// in key order after the key after (nil: from the start), at most limit
// rows (0: no limit). An ordered query reads at most limit rows, and never
// more than maxQueryRows+1.
func (c *collection) querySQL(q *driver.Query, paged bool, after *string, limit int) (string, []any, error) {
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
	if after != nil {
		where = append(where, "key > "+arg(*after)+"::text")
	}
	var b strings.Builder
	b.WriteString("SELECT key, revision, doc FROM " + c.table)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	switch {
	case paged:
		b.WriteString(" ORDER BY key")
	case q.OrderByField != "":
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
	if !paged && (limit <= 0 || limit > maxQueryRows+1) {
		// One row past the bound is enough to report ResourceExhausted;
		// the server never streams more than that.
		limit = maxQueryRows + 1
	}
	if limit > 0 {
		b.WriteString(" LIMIT " + arg(limit))
	}
	if !paged && q.Offset > 0 {
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

// iterator walks the rows a query read, reading the next page of a paged
// query when the rows run out.
type iterator struct {
	c     *collection
	q     *driver.Query
	fps   [][]string
	paged bool
	left  int // rows the query's Limit still allows; 0 without a Limit
	rows  []storedRow
	after *string // the last key read, for the next page
	done  bool    // no more rows in the table
}

// fetch reads the next page (paged) or every row (ordered).
func (it *iterator) fetch(ctx context.Context) error {
	limit := it.q.Limit
	if it.paged {
		limit = pageRows
		if it.q.Limit > 0 {
			limit = min(pageRows, it.left)
		}
	}
	sql, args, err := it.c.querySQL(it.q, it.paged, it.after, limit)
	if err != nil {
		return err
	}
	qctx, cancel := it.c.bound(ctx)
	defer cancel()
	rows, err := it.c.pool.Query(qctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	it.rows = it.rows[:0]
	for rows.Next() {
		var r storedRow
		if err := rows.Scan(&r.key, &r.rev, &r.raw); err != nil {
			return err
		}
		it.rows = append(it.rows, r)
		if !it.paged && len(it.rows) > maxQueryRows {
			return errorf(gcerrors.ResourceExhausted, nil, "pgdocstore: ordered query matches more than %d documents; add a filter or a limit", maxQueryRows)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !it.paged {
		it.done = true
		return nil
	}
	if it.q.Limit > 0 {
		it.left -= len(it.rows)
	}
	if len(it.rows) < limit || (it.q.Limit > 0 && it.left <= 0) {
		it.done = true
	}
	if n := len(it.rows); n > 0 {
		last := it.rows[n-1].key
		it.after = &last
	}
	return nil
}

// Next implements driver.DocumentIterator.Next.
func (it *iterator) Next(ctx context.Context, doc driver.Document) error {
	for len(it.rows) == 0 {
		if it.done {
			return io.EOF
		}
		if err := it.fetch(ctx); err != nil {
			return err
		}
	}
	r := it.rows[0]
	it.rows = it.rows[1:]
	return it.c.decodeInto(r.raw, r.rev, doc, it.fps)
}

// Stop implements driver.DocumentIterator.Stop.
func (it *iterator) Stop() { it.rows, it.done = nil, true }

// As implements driver.DocumentIterator.As; there is nothing to expose.
func (it *iterator) As(any) bool { return false }
