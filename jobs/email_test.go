package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/pquerna/otp/totp"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/app/audit"
	"github.com/sekali/sekali/app/gateways/sandbox"
	"github.com/sekali/sekali/app/jobview"
	"github.com/sekali/sekali/app/mail"
	"github.com/sekali/sekali/app/metrics"
	"github.com/sekali/sekali/app/payments"
	"github.com/sekali/sekali/app/testenv"
	"github.com/sekali/sekali/jobs"
	"github.com/sekali/sekali/models"
)

// The emails that tell a customer what became of their order and their
// refunds: each is written once with what causes it, sent once behind
// the guard, and only while it is true.

// tellRefund delivers the sandbox's news that refund refundID of orderID's
// charge (20,000) is in state, under event id eventID.
func (e *env) tellRefund(orderID, refundID, eventID string, state models.RefundStatus) payments.Outcome {
	e.t.Helper()
	body := fmt.Appendf(nil, `{"order_id":%q,"transaction_id":%q,"payment_status":"refunded","paid_amount":20000,"currency":"IDR","refund_id":%q,"refund_status":%q}`,
		orderID, "tx-"+orderID, refundID, state)
	return e.pay.Receive(context.Background(), payments.Delivery{Provider: sandbox.Name, Body: bytes.NewReader(body), ContentType: "application/json",
		Header: testenv.SandboxHeaders(eventID, body, time.Now())})
}

// task reads the outbox row of task id; it fails the test unless there
// is exactly one.
func (e *env) task(id string) models.OutboxMessage {
	e.t.Helper()
	var ms []models.OutboxMessage
	e.db.Find(&ms, "task_id = ?", id)
	if len(ms) != 1 {
		e.t.Fatalf("%d outbox rows %s, want 1", len(ms), id)
	}
	return ms[0]
}

// emailTask is the id of the email task of template about orderID (and
// refund refundID, for a refund's).
func emailTask(template, orderID string, refundID int64) string {
	a := jobs.EmailArgs{Template: template, OrderID: orderID, RefundID: refundID}
	return a.Kind().ID(a.Key())
}

// refundID is the id of orderID's refund keyed key.
func (e *env) refundID(orderID, key string) int64 {
	e.t.Helper()
	var r models.Refund
	if err := e.db.Take(&r, "order_id = ? AND refund_key = ?", orderID, key).Error; err != nil {
		e.t.Fatalf("refund %s of %s: %v", key, orderID, err)
	}
	return r.ID
}

// sentOnce checks that the email with key is sent, that the mailer took
// exactly one message with its Message-ID, that its subject starts with
// subject, and that neither it nor its row holds a link that opens the
// order.
func (e *env) sentOnce(key, subject string) {
	e.t.Helper()
	var rows []models.OutboundEmail
	e.db.Find(&rows, "key = ?", key)
	if len(rows) != 1 || rows[0].Status != models.EmailSent {
		e.t.Fatalf("emails %s: %+v, want one, sent", key, rows)
	}
	_, sent := e.mailer.calls()
	n := 0
	for _, id := range sent {
		if id == rows[0].MessageID {
			n++
		}
	}
	if n != 1 || !strings.HasPrefix(rows[0].Subject, subject) || strings.Contains(rows[0].Body, "?t=") {
		e.t.Errorf("email %s sent %d times, subject %q, body %q; want once, %q…, no access link", key, n, rows[0].Subject, rows[0].Body, subject)
	}
}

// emailResult is what m's email job says it did (its Effect's result),
// run again outside the guard: a job's row keeps only its hash.
func (e *env) emailResult(m models.OutboxMessage) (string, error) {
	email := jobs.NewEmail(e.db, e.mailer, "shop@example.com", time.Now, metrics.New())
	return email.Effect(context.Background(), e.db, jobs.Job{Key: m.TaskID, Type: m.TaskType, Payload: m.Payload})
}

// jobsChecksGreen fails the test when the audit's jobs check finds
// anything: a job that rightly sent nothing is not a lost email. (The
// paid orders' own emails are not run here: check 7 would want them.)
func (e *env) jobsChecksGreen() {
	e.t.Helper()
	report, err := audit.New(e.db).Run(context.Background(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range report.Violations {
		if v.Check == "jobs" {
			e.t.Errorf("audit: %s", v.Detail)
		}
	}
}

// runTwiceAtOnceThenAgain delivers m to two workers at the same moment,
// then once more after both finished, as redeliveries would.
func (e *env) runTwiceAtOnceThenAgain(m models.OutboxMessage, w1, w2 *worker) {
	e.t.Helper()
	e.enqueue(m, w1.queue)
	e.enqueue(m, w2.queue)
	e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted)
	e.waitState(w2.queue, m.TaskID, asynq.TaskStateCompleted)
	if err := e.insp.RunTask(w1.queue, m.TaskID); err != nil {
		e.t.Fatal(err)
	}
	e.waitState(w1.queue, m.TaskID, asynq.TaskStateCompleted)
	if j := e.job(m.TaskID); j.Status != models.JobSucceeded {
		e.t.Fatalf("job %s: %s, want succeeded", m.TaskID, j.Status)
	}
}

// A refund that succeeded writes its customer's email task in the same
// transaction; delivered to two workers at once and then again, it sends
// one message, "Your refund of …", which holds no access link. When the
// refund then fails at the gateway, one failure task is written however
// often, and however concurrently, the failure is told, and it too sends
// one message.
func TestRefundAndItsFailureAreToldOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1, w2 := e.normalWorker("w1", retryWhileLocked()), e.normalWorker("w2", retryWhileLocked())
	orderID := e.paidOrder()
	if out := e.tellRefund(orderID, "r-told", "evt_ok_"+orderID, models.RefundSucceeded); out.Result != models.ResultProcessed {
		t.Fatalf("refund succeeded: %+v", out)
	}
	id := e.refundID(orderID, "r-told")
	e.runTwiceAtOnceThenAgain(e.task(emailTask(mail.RefundSucceeded, orderID, id)), w1, w2)
	e.sentOnce(mail.RefundKey(mail.RefundSucceeded, orderID, id), "Your refund of Rp 20.000")

	// The failure, told by ten deliveries at once: five of one event,
	// five of as many others (a gateway and the catch-up tell it anew).
	outs := make([]payments.Outcome, 10)
	var tells []func()
	for i := range outs {
		event := "evt_failed_" + orderID
		if i%2 == 1 {
			event = fmt.Sprintf("evt_failed_%d_%s", i, orderID)
		}
		tells = append(tells, func() { outs[i] = e.tellRefund(orderID, "r-told", event, models.RefundFailed) })
	}
	testenv.AtOnce(tells...)
	processed := 0
	for _, out := range outs {
		if out.Status() != 200 {
			t.Fatalf("the failure: %+v", out)
		}
		if out.Result == models.ResultProcessed {
			processed++
		}
	}
	failedTask := emailTask(mail.RefundFailed, orderID, id)
	if n := e.count("SELECT count(*) FROM outbox_messages WHERE task_id LIKE ?", "email:send:refund_failed:%"); processed != 1 || n != 1 {
		t.Fatalf("%d deliveries applied the failure and %d failure tasks were written, want 1 and 1", processed, n)
	}
	e.runTwiceAtOnceThenAgain(e.task(failedTask), w1, w2)
	e.sentOnce(mail.RefundKey(mail.RefundFailed, orderID, id), "Your refund of Rp 20.000 for order "+orderID+" did not go through")
	e.jobsChecksGreen()
}

// A refund that succeeded and failed before its first email went out:
// the customer never heard of it, so they do not hear of its failure
// either. Both jobs succeed sending nothing, say so, and the audit holds
// that for right — not for a lost email, which would turn it red for good
// (the jobs cannot be discarded: they succeeded).
func TestRefundFailedBeforeItsEmailSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.normalWorker("w1")
	orderID := e.paidOrder()
	e.tellRefund(orderID, "r-quiet", "evt_ok_"+orderID, models.RefundSucceeded)
	e.tellRefund(orderID, "r-quiet", "evt_failed_"+orderID, models.RefundFailed)
	id := e.refundID(orderID, "r-quiet")
	for _, m := range []models.OutboxMessage{e.task(emailTask(mail.RefundSucceeded, orderID, id)), e.task(emailTask(mail.RefundFailed, orderID, id))} {
		e.enqueue(m, w.queue)
		e.waitState(w.queue, m.TaskID, asynq.TaskStateCompleted)
		if j := e.job(m.TaskID); j.Status != models.JobSucceeded {
			t.Fatalf("%s: %s, want succeeded", m.TaskID, j.Status)
		}
	}
	if n := e.count("SELECT count(*) FROM outbound_emails"); n != 0 {
		t.Errorf("%d emails, want none", n)
	}
	if result, err := e.emailResult(e.task(emailTask(mail.RefundFailed, orderID, id))); err != nil || !strings.Contains(result, "never told") {
		t.Errorf("the failure's job: %q, %v; want it to say the customer was never told", result, err)
	}
	e.jobsChecksGreen()
}

// The email of a refund that succeeded is tried only while the refund
// still has: one made before the refund failed and not yet tried is never
// sent, and its failure has nothing to take back. One tried before the
// failure, whose try failed, may have reached the customer: the failure's
// email waits until that email's own job has settled it, then tells.
func TestRefundEmailTriedOrNotBeforeItsRefundFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	orderID := e.paidOrder()
	e.tellRefund(orderID, "r-untried", "evt_ok1_"+orderID, models.RefundSucceeded)
	e.tellRefund(orderID, "r-tried", "evt_ok2_"+orderID, models.RefundSucceeded)
	untried, tried := e.refundID(orderID, "r-untried"), e.refundID(orderID, "r-tried")

	// Both intents are made while the refunds stand; one is tried, and
	// the mail server refuses it.
	first, err := mail.RefundSucceededIntent(ctx, e.db, orderID, untried)
	if err != nil || first == nil {
		t.Fatalf("intent: %v, %v", first, err)
	}
	second, err := mail.RefundSucceededIntent(ctx, e.db, orderID, tried)
	if err != nil || second == nil {
		t.Fatalf("intent: %v, %v", second, err)
	}
	e.mailer.failFirst = 1
	if err := mail.Deliver(ctx, e.db, e.mailer, "shop@example.com", second); !errors.Is(err, errSMTPDown) {
		t.Fatalf("the refused try: %v", err)
	}
	e.tellRefund(orderID, "r-untried", "evt_failed1_"+orderID, models.RefundFailed)
	e.tellRefund(orderID, "r-tried", "evt_failed2_"+orderID, models.RefundFailed)

	// The untried one is not tried now, nor marked sent, and its failure
	// tells nothing.
	if err := mail.Deliver(ctx, e.db, e.mailer, "shop@example.com", first); err != nil {
		t.Fatal(err)
	}
	if sent, err := mail.MarkSentTx(e.db, first.Key, time.Now(), false); err != nil || sent {
		t.Errorf("the untried email marked sent: %v, %v", sent, err)
	}
	if tries, _ := e.mailer.calls(); len(tries) != 1 {
		t.Errorf("%d tries, want only the refused one: an email whose refund failed is not tried", len(tries))
	}
	if told, err := mail.RefundFailedIntent(ctx, e.db, orderID, untried); told != nil || err != nil {
		t.Errorf("the untried refund's failure: %v, %v; want nothing to tell", told, err)
	}

	// The tried one may have reached the customer: its failure waits
	// for its job, which marks it sent, then tells.
	d := jobs.Deps{DB: e.db, Now: time.Now, Metrics: metrics.New(), Mailer: e.mailer, MailFrom: "shop@example.com",
		Guard: jobs.NewGuard(e.db, e.rdb, e.log, "w1", 30*time.Second, metrics.New())}
	failed := e.task(emailTask(mail.RefundFailed, orderID, tried))
	if out, err := jobs.RunGuarded(ctx, d, failed, 1); out != jobs.RunFailed || !errors.Is(err, mail.ErrToldMaybe) {
		t.Fatalf("the failure's job before the first email settled: %s, %v; want failed, to be retried", out, err)
	}
	if out, err := jobs.RunGuarded(ctx, d, e.task(emailTask(mail.RefundSucceeded, orderID, tried)), 1); out != jobs.RunSucceeded {
		t.Fatalf("the first email's job: %s, %v", out, err)
	}
	if out, err := jobs.RunGuarded(ctx, d, failed, 2); out != jobs.RunSucceeded {
		t.Fatalf("the failure's job, again: %s, %v", out, err)
	}
	e.sentOnce(mail.RefundKey(mail.RefundFailed, orderID, tried), "Your refund of Rp 20.000")
	if tries, _ := e.mailer.calls(); len(tries) != 2 {
		t.Errorf("%d tries, want the refused one and the failure's: the first is not tried again once its refund failed", len(tries))
	}
	e.jobsChecksGreen()
}

// An order cancelled — by many requests at once — or expired — by its
// job, the sweep and its gateway's word, all at once — writes its
// customer's email task once, and the email goes out once. An order a
// late payment took back is no longer cancelled: its email job sends
// nothing, says so, and the audit holds that for right.
func TestOrderEndIsToldOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	w1, w2 := e.normalWorker("w1", retryWhileLocked()), e.normalWorker("w2", retryWhileLocked())
	d := jobs.Deps{DB: e.db, Now: time.Now, Metrics: metrics.New(), Orders: e.orders,
		Guard: jobs.NewGuard(e.db, e.rdb, e.log, "w0", 30*time.Second, metrics.New())}
	cancelled := e.pendingOrder()
	var cancels []func()
	for range 8 {
		cancels = append(cancels, func() {
			if _, err := e.orders.Cancel(ctx, cancelled.ID, models.CauseCustomer); err != nil {
				t.Error(err)
			}
		})
	}
	testenv.AtOnce(cancels...)

	expired := e.pendingOrder()
	expiry := e.task(jobs.Tasks{}.Expire(expired.ID, time.Time{}).TaskID)
	body := testenv.SandboxBody(expired.ID, "tx-"+expired.ID, models.EventExpired, price)
	testenv.AtOnce(
		func() { jobs.RunGuarded(ctx, d, expiry, 1) },
		func() { e.orders.Expire(ctx, expired.ID) },
		func() { e.orders.Expire(ctx, expired.ID) },
		func() {
			e.pay.Receive(ctx, payments.Delivery{Provider: sandbox.Name, Header: testenv.SandboxHeaders("evt_exp_"+expired.ID, body, time.Now()),
				Body: bytes.NewReader(body), ContentType: "application/json"})
		},
	)
	if o, _ := e.orders.Get(ctx, expired.ID); o.Status != models.OrderExpired {
		t.Fatalf("order %s is %s, want expired", expired.ID, o.Status)
	}

	for _, c := range []struct {
		order           *models.Order
		template, title string
	}{
		{cancelled, mail.OrderCancelled, "Your order " + cancelled.ID + " was cancelled"},
		{expired, mail.OrderExpired, "Your order " + expired.ID + " has expired"},
	} {
		if n := e.count("SELECT count(*) FROM outbox_messages WHERE task_id LIKE ?", "email:send:%:"+c.order.ID); n != 1 {
			t.Errorf("order %s: %d email tasks, want 1", c.order.ID, n)
		}
		e.runTwiceAtOnceThenAgain(e.task(emailTask(c.template, c.order.ID, 0)), w1, w2)
		e.sentOnce(mail.Key(c.template, c.order.ID), c.title)
	}

	// Cancelled, then paid late: the customer hears of the payment only.
	late := e.pendingOrder()
	if _, err := e.orders.Cancel(ctx, late.ID, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	paid := testenv.SandboxBody(late.ID, "tx-"+late.ID, models.EventPaid, price)
	if out := e.pay.Receive(ctx, payments.Delivery{Provider: sandbox.Name, Header: testenv.SandboxHeaders("evt_"+late.ID, paid, time.Now()),
		Body: bytes.NewReader(paid), ContentType: "application/json"}); out.OrderStatus != models.OrderPaid {
		t.Fatalf("the late payment: %+v", out)
	}
	m := e.task(emailTask(mail.OrderCancelled, late.ID, 0))
	if out, err := jobs.RunGuarded(ctx, jobs.Deps{DB: e.db, Now: time.Now, Metrics: metrics.New(), Mailer: e.mailer, Guard: d.Guard}, m, 1); out != jobs.RunSucceeded {
		t.Fatalf("the cancellation's email of an order paid since: %s, %v", out, err)
	}
	if n := e.count("SELECT count(*) FROM outbound_emails WHERE key = ?", mail.Key(mail.OrderCancelled, late.ID)); n != 0 {
		t.Errorf("%d cancellation emails of an order paid since, want none", n)
	}
	if result, err := e.emailResult(m); err != nil || result != "no longer cancelled: nothing to send" {
		t.Errorf("its job: %q, %v", result, err)
	}
	e.jobsChecksGreen()
}

// A cancellation's email task whose outbox row was pruned, run again from
// the console, is rebuilt from its id: the same template, order and task
// id, due now.
func TestPrunedEndEmailIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	o := e.pendingOrder()
	if _, err := e.orders.Cancel(ctx, o.ID, models.CauseCustomer); err != nil {
		t.Fatal(err)
	}
	key := emailTask(mail.OrderCancelled, o.ID, 0)
	if err := e.db.Where("task_id = ?", key).Delete(&models.OutboxMessage{}).Error; err != nil {
		t.Fatal(err)
	}
	outcome, err := e.console().Rerun(ctx, key)
	checkOutcome(t, "Rerun "+key, outcome, err, jobview.RerunRedispatched)
	row := relayRow(t, e.db, key)
	want := jobs.Row(jobs.EmailArgs{Template: mail.OrderCancelled, OrderID: o.ID}, time.Now())
	if row.Status != models.OutboxPending || row.ProcessAt.After(time.Now()) || string(row.Payload) != string(want.Payload) {
		t.Errorf("rebuilt row %s: %s, due %v, payload %s; want pending, due, %s", key, row.Status, row.ProcessAt, row.Payload, want.Payload)
	}
}

// An admin's notice of a second factor removed is written with the
// removal, and its task sends it once behind the guard, however often it
// is delivered; the jobs check finds nothing amiss.
func TestAdminNoticeIsSentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	w1, w2 := e.normalWorker("w1", retryWhileLocked()), e.normalWorker("w2", retryWhileLocked())
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	hash := "$2a$04$abcdefghijklmnopqrstuuJ8ZkN8ZkN8ZkN8ZkN8ZkN8ZkN8ZkN8Z" // never checked here
	u := models.AdminUser{Email: "owner@example.com", PasswordHash: hash, TOTPSecret: ptr(secret)}
	if err := e.db.Create(&u).Error; err != nil {
		t.Fatal(err)
	}
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := admins.NewService(e.db, time.Now).Notifying(jobs.Tasks{}).RemoveTOTP(ctx, u.Email, code); err != nil {
		t.Fatal(err)
	}
	var notice models.OutboundEmail
	if err := e.db.Take(&notice, "key LIKE 'admin_notice:%'").Error; err != nil {
		t.Fatal(err)
	}
	if notice.To != u.Email || notice.Status != models.EmailPending {
		t.Fatalf("the notice: %+v, want one to the admin, pending", notice)
	}
	e.runTwiceAtOnceThenAgain(e.task(jobs.Tasks{}.AdminNotice(notice.Key, time.Now()).TaskID), w1, w2)
	e.sentOnce(notice.Key, "The second factor of your Sekali console account was removed")
	e.jobsChecksGreen()
}

func ptr[T any](v T) *T { return &v }
