package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// writeList answers a list endpoint, applying RabbitMQ's query
// parameters: name (a substring of the name, or with use_regex=true a
// regular expression), sort (a field, dotted for nested ones such as
// message_stats.publish) and sort_reverse, page and page_size (then the
// answer is a page object, not a list), and columns (a comma-separated
// list of the fields to keep). Handlers pass items in RabbitMQ's order:
// by vhost, then name.
func writeList(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	if items == nil {
		items = []map[string]any{} // [] rather than null
	}
	q := r.URL.Query()
	total := len(items)
	if name := q.Get("name"); name != "" {
		match := func(s string) bool { return strings.Contains(s, name) }
		if q.Get("use_regex") == "true" {
			re, err := regexp.Compile(name)
			if err != nil {
				writeBadRequest(w, "invalid regular expression: "+err.Error())
				return
			}
			match = re.MatchString
		}
		items = slices.DeleteFunc(items, func(it map[string]any) bool {
			s, _ := it["name"].(string)
			return !match(s)
		})
	}
	if key := q.Get("sort"); key != "" {
		path := strings.Split(key, ".")
		slices.SortStableFunc(items, func(a, b map[string]any) int { return compareFields(field(a, path), field(b, path)) })
	}
	if q.Get("sort_reverse") == "true" {
		slices.Reverse(items)
	}
	filtered := len(items)
	var page, pageSize, pageCount int
	if q.Has("page") {
		var ok bool
		if page, ok = pageParam(q.Get("page"), 1); !ok {
			writeBadRequest(w, "page must be a positive integer")
			return
		}
		if pageSize, ok = pageParam(q.Get("page_size"), 100); !ok || pageSize > 500 {
			writeBadRequest(w, "page_size must be an integer from 1 to 500")
			return
		}
		pageCount = (filtered + pageSize - 1) / pageSize
		if page > max(pageCount, 1) {
			writeBadRequest(w, "page out of range")
			return
		}
		items = items[min((page-1)*pageSize, filtered):min(page*pageSize, filtered)]
	}
	if cols := q.Get("columns"); cols != "" {
		items = keepColumns(items, strings.Split(cols, ","))
	}
	if !q.Has("page") {
		writeJSON(w, http.StatusOK, items)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"filtered_count": filtered, "item_count": len(items), "items": items, "page": page,
		"page_count": pageCount, "page_size": pageSize, "total_count": total,
	})
}

func pageParam(s string, def int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

// field returns the value at a dotted path of an object, nil if absent.
func field(obj map[string]any, path []string) any {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// compareFields orders values of one field: absent first, then numbers
// by value, anything else by its text.
func compareFields(a, b any) int {
	if a == nil || b == nil {
		return cmp.Compare(boolRank(a != nil), boolRank(b != nil))
	}
	na, aNum := number(a)
	nb, bNum := number(b)
	if aNum && bNum {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(text(a), text(b))
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// number reads a value of any numeric type (the objects hold int, int64,
// uint16, float64 ...).
func number(v any) (float64, bool) {
	switch rv := reflect.ValueOf(v); {
	case rv.CanInt():
		return float64(rv.Int()), true
	case rv.CanUint():
		return float64(rv.Uint()), true
	case rv.CanFloat():
		return rv.Float(), true
	}
	return 0, false
}

func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// keepColumns keeps only the fields named (dotted for nested ones) of
// each item.
func keepColumns(items []map[string]any, cols []string) []map[string]any {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		kept := map[string]any{}
		for _, col := range cols {
			path := strings.Split(col, ".")
			v := field(it, path)
			if v == nil {
				continue
			}
			dst := kept
			for _, k := range path[:len(path)-1] {
				next, ok := dst[k].(map[string]any)
				if !ok {
					next = map[string]any{}
					dst[k] = next
				}
				dst = next
			}
			dst[path[len(path)-1]] = v
		}
		out[i] = kept
	}
	return out
}
