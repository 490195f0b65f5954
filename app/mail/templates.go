package mail

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/sekali/sekali/models"
)

// The templates: the payment confirmation; a refund that succeeded, and
// the same refund failing after that; an order cancelled, an order
// expired. Each is an email about one order (and one refund), sent once.
const (
	OrderPaid       = "order_paid"
	RefundSucceeded = "refund_succeeded"
	RefundFailed    = "refund_failed"
	OrderCancelled  = "order_cancelled"
	OrderExpired    = "order_expired"
)

// Templates are the templates this package sends: a job naming any
// other can never succeed.
var Templates = []string{OrderPaid, RefundSucceeded, RefundFailed, OrderCancelled, OrderExpired, AdminNotice}

// AboutRefund reports whether an email of template is about one refund
// of the order (its key ends in the refund's id: RefundKey).
func AboutRefund(template string) bool {
	return template == RefundSucceeded || template == RefundFailed
}

// Each intent below returns the outbound_emails row of its email,
// creating it while what the email tells is true, and nil when it is
// not: an email job decides when it runs whether it still has something
// true to tell. None takes a lock or opens a transaction: the row's
// unique key makes a second intent the same row.

// OrderPaidIntent returns the row of orderID's payment confirmation,
// made once the order was paid.
func OrderPaidIntent(ctx context.Context, db *gorm.DB, orderID string) (*models.OutboundEmail, error) {
	o, err := order(db.WithContext(ctx), orderID)
	if err != nil || !o.Status.WasPaid() {
		return nil, err
	}
	return intent(db.WithContext(ctx), OrderPaidEmail(o))
}

// OrderEndedIntent returns the row of the email that tells the customer
// of orderID that it was cancelled (template OrderCancelled) or expired
// (OrderExpired), made while the order still is. A late payment takes
// such an order back (paid, or refund_required): the customer then hears
// of that payment, and this email, no longer true, is not sent.
func OrderEndedIntent(ctx context.Context, db *gorm.DB, template, orderID string) (*models.OutboundEmail, error) {
	o, err := order(db.WithContext(ctx), orderID)
	if err != nil {
		return nil, err
	}
	switch {
	case template == OrderCancelled && o.Status == models.OrderCancelled:
		return intent(db.WithContext(ctx), OrderCancelledEmail(o))
	case template == OrderExpired && o.Status == models.OrderExpired:
		return intent(db.WithContext(ctx), OrderExpiredEmail(o))
	}
	return nil, nil
}

// RefundSucceededIntent returns the row of the email that tells the
// customer of orderID that refund refundID went through, made while the
// refund has succeeded; a refund that failed sends nothing. The email is
// tried only while the refund still has succeeded (Deliver), so that its
// failure's email knows whether it went out (RefundFailedIntent).
func RefundSucceededIntent(ctx context.Context, db *gorm.DB, orderID string, refundID int64) (*models.OutboundEmail, error) {
	o, r, err := refund(db.WithContext(ctx), orderID, refundID)
	if err != nil || r.Status != models.RefundSucceeded {
		return nil, err
	}
	return intent(db.WithContext(ctx), RefundSucceededEmail(o, r))
}

// ErrToldMaybe is RefundFailedIntent's answer while the email that told
// the refund succeeded was tried and not marked sent: it may have
// reached the customer, and its job, which settles that (it marks the
// row sent once a try may have reached them), has not ended. A retry
// asks again.
var ErrToldMaybe = errors.New("the email that told the refund succeeded may be on its way")

// RefundFailedIntent returns the row of the email that tells the customer
// of orderID that refund refundID, which they were told went through,
// failed after all: made when the refund failed (or was canceled) and
// its refund_succeeded email was sent. A customer never told of the
// refund is not told of its failure: nil. Both facts are final — a
// failed refund never moves again, a sent email stays sent — so once
// true the email stays true, and once nil it stays nil: a refund that
// failed is never tried again (Deliver), so its first email, not sent
// and not tried by then, never will be.
func RefundFailedIntent(ctx context.Context, db *gorm.DB, orderID string, refundID int64) (*models.OutboundEmail, error) {
	db = db.WithContext(ctx)
	o, r, err := refund(db, orderID, refundID)
	if err != nil || r.Status != models.RefundFailed && r.Status != models.RefundCanceled {
		return nil, err
	}
	var told []models.OutboundEmail
	if err := db.Where("key = ?", RefundKey(RefundSucceeded, orderID, refundID)).Limit(1).Find(&told).Error; err != nil {
		return nil, err
	}
	switch {
	case len(told) == 0 || told[0].Status != models.EmailSent && told[0].Attempts == 0:
		return nil, nil
	case told[0].Status != models.EmailSent:
		return nil, fmt.Errorf("mail: refund %d of %s: %w", refundID, orderID, ErrToldMaybe)
	}
	return intent(db, RefundFailedEmail(o, r))
}

// order reads order id; ENotFound when there is none.
func order(db *gorm.DB, id string) (*models.Order, error) {
	var o models.Order
	err := db.Take(&o, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.Errorf(models.ENotFound, "no order %q", id)
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// refund reads order orderID and its refund refundID; ENotFound when
// either is missing.
func refund(db *gorm.DB, orderID string, refundID int64) (*models.Order, *models.Refund, error) {
	var o models.Order
	var r models.Refund
	err := db.Take(&o, "id = ?", orderID).Error
	if err == nil {
		err = db.Take(&r, "id = ? AND order_id = ?", refundID, orderID).Error
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, models.Errorf(models.ENotFound, "no refund %d of order %q", refundID, orderID)
	}
	if err != nil {
		return nil, nil, err
	}
	return &o, &r, nil
}

// The emails, not sent yet. Like every kept email, none holds a link
// with the order's access token: what the database keeps must not open
// the order.

// OrderPaidEmail is the payment confirmation email of o.
func OrderPaidEmail(o *models.Order) models.OutboundEmail {
	return email(Key(OrderPaid, o.ID), o, fmt.Sprintf("Payment received for order %s", o.ID),
		fmt.Sprintf("Thank you! We received your payment of %d %s for order %s.\n", o.TotalAmount, o.Currency, o.ID))
}

// OrderCancelledEmail is the email that tells o's customer it was
// cancelled.
func OrderCancelledEmail(o *models.Order) models.OutboundEmail {
	return email(Key(OrderCancelled, o.ID), o, fmt.Sprintf("Your order %s was cancelled", o.ID),
		fmt.Sprintf("Your order %s of %s was cancelled, and its items are back on sale.\nNothing was charged for it.\n",
			o.ID, models.Money(o.TotalAmount, o.Currency)))
}

// OrderExpiredEmail is the email that tells o's customer it expired
// unpaid.
func OrderExpiredEmail(o *models.Order) models.OutboundEmail {
	return email(Key(OrderExpired, o.ID), o, fmt.Sprintf("Your order %s has expired", o.ID),
		fmt.Sprintf("Your order %s of %s was not paid in time, so it expired and its items are back on sale.\nNothing was charged for it.\n",
			o.ID, models.Money(o.TotalAmount, o.Currency)))
}

// RefundSucceededEmail is the email of refund r of o.
func RefundSucceededEmail(o *models.Order, r *models.Refund) models.OutboundEmail {
	amount := models.Money(r.Amount, r.Currency)
	return email(RefundKey(RefundSucceeded, o.ID, r.ID), o, fmt.Sprintf("Your refund of %s for order %s", amount, o.ID),
		fmt.Sprintf("Your refund of %s for order %s has been sent back to the way you paid.\n"+
			"Depending on your bank it can take a few days to show.\n", amount, o.ID))
}

// RefundFailedEmail is the email that tells o's customer that refund r,
// of which RefundSucceededEmail told them, failed after all.
func RefundFailedEmail(o *models.Order, r *models.Refund) models.OutboundEmail {
	amount := models.Money(r.Amount, r.Currency)
	return email(RefundKey(RefundFailed, o.ID, r.ID), o, fmt.Sprintf("Your refund of %s for order %s did not go through", amount, o.ID),
		fmt.Sprintf("Your refund of %s for order %s did not go through: the payment provider could not complete it after all,\n"+
			"so the money was not sent back to you, whatever our earlier email about it said.\n"+
			"If you are still owed it, the shop can refund you again.\n", amount, o.ID))
}

// email is the row of an email about o with key, subject and body.
func email(key string, o *models.Order, subject, body string) models.OutboundEmail {
	return models.OutboundEmail{Key: key, MessageID: MessageID(key), To: o.CustomerEmail, Subject: subject, Body: body,
		Status: models.EmailPending}
}
