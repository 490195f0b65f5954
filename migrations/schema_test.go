package migrations_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/sekali/sekali/app/store"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/migrations"
	"github.com/sekali/sekali/models"
)

// allModels lists every GORM model in models/; a new model belongs here.
var allModels = []any{
	&models.JobAttempt{},
	&models.Product{},
	&models.StockMovement{},
	&models.Order{},
	&models.OrderItem{},
	&models.Payment{},
	&models.Refund{},
	&models.PaymentCallback{},
	&models.CallbackDelivery{},
	&models.APIIdempotencyKey{},
	&models.OutboxMessage{},
	&models.AdminUser{},
	&models.AdminInvitation{},
	&models.Invoice{},
	&models.InvoiceCounter{},
	&models.OutboundEmail{},
	&models.JobExecution{},
	&models.OrderTransition{},
	&models.AdminAction{},
	&models.LoginFailure{},
	&models.AuditRun{},
	&models.DeliveryCount{},
	&models.RollupMark{},
	&models.GatewayRequest{},
	&models.Alert{},
	&models.CatchUpRun{},
}

type column struct {
	dataType string
	nullable bool
}

func TestModelsMatchMigrations(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	checkModels(t, db)
}

// checkModels compares every model's fields with its table's columns, in
// both directions, with a type and nullability each side can hold.
func checkModels(t *testing.T, db *gorm.DB) {
	t.Helper()
	cache := &sync.Map{}
	tables := map[string]bool{}
	for _, m := range allModels {
		s, err := schema.Parse(m, cache, db.NamingStrategy)
		if err != nil {
			t.Fatalf("parse %T: %v", m, err)
		}
		if tables[s.Table] {
			t.Errorf("%T: table %s is used by two models", m, s.Table)
		}
		tables[s.Table] = true
		t.Run(s.Table, func(t *testing.T) {
			t.Parallel()
			cols := tableColumns(t, db, s.Table)
			if len(cols) == 0 {
				t.Fatalf("%s (model %s) does not exist in the migrated database", s.Table, s.Name)
			}
			fields := map[string]*schema.Field{}
			for _, f := range s.Fields {
				if f.DBName != "" {
					fields[f.DBName] = f
				}
			}
			for _, name := range slices.Sorted(maps.Keys(fields)) {
				if _, ok := cols[name]; !ok {
					t.Errorf("%s.%s has no column %s.%s", s.Name, fields[name].Name, s.Table, name)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(cols)) {
				f, ok := fields[name]
				if !ok {
					t.Errorf("column %s.%s has no field in %s", s.Table, name, s.Name)
					continue
				}
				col := cols[name]
				want := columnTypes(f.IndirectFieldType)
				if f.TagSettings["SERIALIZER"] == "json" { // GORM writes the value as JSON
					want = []string{"jsonb"}
				}
				if !slices.Contains(want, col.dataType) {
					t.Errorf("%s.%s (%s) is stored in %s.%s of type %s, want one of %q",
						s.Name, f.Name, f.FieldType, s.Table, name, col.dataType, want)
				}
				// NULL cannot be scanned into a plain value, and a pointer
				// to a NOT NULL column hides which fields may be absent. A
				// byte slice is the one plain type that holds NULL (nil):
				// it may stand for either.
				bytes := f.FieldType.Kind() == reflect.Slice && f.FieldType.Elem().Kind() == reflect.Uint8
				if isPtr := f.FieldType.Kind() == reflect.Pointer; isPtr != col.nullable && !bytes {
					t.Errorf("%s.%s is %s but column %s.%s nullable = %v", s.Name, f.Name, f.FieldType, s.Table, name, col.nullable)
				}
			}
		})
	}
}

// columnTypes lists the PostgreSQL types a Go field type maps onto.
func columnTypes(t reflect.Type) []string {
	if t == reflect.TypeFor[json.RawMessage]() {
		return []string{"jsonb"}
	}
	if t == reflect.TypeFor[time.Time]() {
		return []string{"timestamp with time zone"} // timestamptz everywhere (docs/README.md#tables-and-their-guards)
	}
	switch t.Kind() {
	case reflect.String:
		return []string{"text"}
	case reflect.Int64:
		return []string{"bigint"}
	case reflect.Int, reflect.Int32:
		return []string{"integer", "bigint"}
	case reflect.Bool:
		return []string{"boolean"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return []string{"bytea"}
		}
	}
	return []string{"(no mapping for " + t.String() + ")"}
}

func tableColumns(t *testing.T, db *gorm.DB, table string) map[string]column {
	t.Helper()
	var rows []struct {
		ColumnName string
		DataType   string
		IsNullable string
	}
	err := db.Raw(`SELECT column_name, data_type, is_nullable
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ?`, table).Scan(&rows).Error
	if err != nil {
		t.Fatalf("columns of %s: %v", table, err)
	}
	cols := map[string]column{}
	for _, r := range rows {
		cols[r.ColumnName] = column{dataType: r.DataType, nullable: r.IsNullable == "YES"}
	}
	return cols
}

// The guards that make each effect happen once
// (docs/README.md#tables-and-their-guards).
func TestUniqueGuards(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	tests := []struct {
		name    string
		table   string
		columns []string
		partial bool // unique among the rows its WHERE selects
	}{
		{"products_sku_key", "products", []string{"sku"}, false},
		{"order_items_order_id_sku_key", "order_items", []string{"order_id", "sku"}, false},
		{"stock_movements_order_id_sku_kind_key", "stock_movements", []string{"order_id", "sku", "kind"}, false},
		{"payments_provider_provider_reference_key", "payments", []string{"provider", "provider_reference"}, false},
		{"payment_callbacks_provider_idempotency_key_key", "payment_callbacks", []string{"provider", "idempotency_key"}, false},
		{"api_idempotency_keys_scope_key_key", "api_idempotency_keys", []string{"scope", "key"}, false},
		{"outbox_messages_task_id_key", "outbox_messages", []string{"task_id"}, false},
		{"admin_users_email_key", "admin_users", []string{"email"}, false},
		{"invoices_order_id_key", "invoices", []string{"order_id"}, false},
		{"invoices_number_key", "invoices", []string{"number"}, false},
		{"outbound_emails_key_key", "outbound_emails", []string{"key"}, false},
		{"job_executions_idempotency_key_key", "job_executions", []string{"idempotency_key"}, false},
		{"invoices_year_sequence_key", "invoices", []string{"year", "sequence"}, false},
		{"outbound_emails_message_id_key", "outbound_emails", []string{"message_id"}, false},
		{"payments_one_succeeded_per_order", "payments", []string{"order_id"}, true},
		{"gateway_requests_provider_idempotency_key_key", "gateway_requests", []string{"provider", "idempotency_key"}, false},
		{"gateway_requests_one_payment_per_order", "gateway_requests", []string{"order_id", "provider"}, true},
	}
	for _, tt := range tests {
		var rows []struct {
			TableName string
			Unique    bool
			Partial   bool
			Columns   string
		}
		err := db.Raw(`SELECT t.relname AS table_name, i.indisunique AS unique, i.indpred IS NOT NULL AS partial,
				(SELECT string_agg(a.attname, ',' ORDER BY a.attname)
				   FROM unnest(i.indkey) AS k(attnum)
				   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) AS columns
			FROM pg_class ic
			JOIN pg_index i ON i.indexrelid = ic.oid
			JOIN pg_class t ON t.oid = i.indrelid
			WHERE ic.relname = ? AND ic.relnamespace = current_schema()::regnamespace`, tt.name).Scan(&rows).Error
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(rows) != 1 {
			t.Errorf("index %s: found %d, want 1", tt.name, len(rows))
			continue
		}
		got := rows[0]
		want := slices.Sorted(slices.Values(tt.columns))
		if got.TableName != tt.table || !got.Unique || got.Partial != tt.partial || got.Columns != strings.Join(want, ",") {
			t.Errorf("index %s is on %s(%s) unique=%v partial=%v; want a unique index on %s(%s), partial=%v",
				tt.name, got.TableName, got.Columns, got.Unique, got.Partial, tt.table, strings.Join(want, ","), tt.partial)
		}
	}
}

func TestProductStockCheck(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	tests := []struct {
		sku     string
		stock   int64
		wantErr string // SQLSTATE; empty: the insert succeeds
	}{
		{"CHECK-ZERO", 0, ""},
		{"CHECK-ONE", 1, ""},
		{"CHECK-NEG", -1, "23514"},
		{"CHECK-MIN", -1 << 63, "23514"},
	}
	for _, tt := range tests {
		p := models.Product{SKU: tt.sku, Name: tt.sku, Price: 1000, Currency: "IDR", Stock: tt.stock}
		err := db.Create(&p).Error
		var pgErr *pgconn.PgError
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("insert %s with stock %d: %v", tt.sku, tt.stock, err)
		case tt.wantErr == "":
		case !errors.As(err, &pgErr):
			t.Errorf("insert %s with stock %d: error %v, want SQLSTATE %s", tt.sku, tt.stock, err, tt.wantErr)
		case pgErr.Code != tt.wantErr || pgErr.TableName != "products":
			t.Errorf("insert %s with stock %d: SQLSTATE %s on %q (%s), want %s on products",
				tt.sku, tt.stock, pgErr.Code, pgErr.TableName, pgErr.ConstraintName, tt.wantErr)
		}
	}
	// The reservation UPDATE relies on the same CHECK as its last guard.
	err := db.Exec("UPDATE products SET stock = stock - 2 WHERE sku = 'CHECK-ONE'").Error
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Errorf("taking stock below zero: error %v, want SQLSTATE 23514", err)
	}
}

// Every down migration must undo its up migration completely, or a
// rollback in production leaves a database the next up cannot migrate.
func TestMigrateDownThenUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.NewDatabaseURL(t)
	db := testenv.OpenDB(t, url)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	sources := p.ListSources()
	if len(sources) == 0 {
		t.Fatal("no migrations")
	}
	latest := sources[len(sources)-1].Version
	version := func() int64 {
		t.Helper()
		v, err := p.GetDBVersion(ctx)
		if err != nil {
			t.Fatalf("goose version: %v", err)
		}
		return v
	}
	if v := version(); v != latest {
		t.Fatalf("fresh database is at version %d, want %d", v, latest)
	}

	for steps := 0; version() > 0; steps++ {
		if steps == len(sources) {
			t.Fatalf("still at version %d after %d downs", version(), steps)
		}
		before := version()
		if err := store.Migrate(ctx, url, "down", io.Discard); err != nil {
			t.Fatalf("down from version %d: %v", before, err)
		}
		if after := version(); after >= before {
			t.Fatalf("down from version %d left version %d", before, after)
		}
	}
	var left []string
	err = db.Raw(`SELECT relname::text FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND relname NOT LIKE 'goose\_db\_version%'
		UNION ALL
		SELECT typname::text FROM pg_type
		WHERE typnamespace = current_schema()::regnamespace AND typtype IN ('e', 'd')
		UNION ALL
		SELECT proname::text FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
		ORDER BY 1`).Scan(&left).Error
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("after migrating all the way down, these remain: %q", left)
	}

	if err := store.Migrate(ctx, url, "up", io.Discard); err != nil {
		t.Fatalf("up after down: %v", err)
	}
	if v := version(); v != latest {
		t.Fatalf("up after down reached version %d, want %d", v, latest)
	}
	if err := store.Migrate(ctx, url, "up", io.Discard); err != nil {
		t.Errorf("a second up: %v", err)
	}
	checkModels(t, db)
}
