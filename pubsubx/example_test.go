package pubsubx_test

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/pubsubx"
	_ "github.com/heraldevents/herald/pubsubx/mem" // registers mem://
)

// Open a broker by URL, create a subscription at the head of the topic,
// send one event and receive it. The same code runs on SNS/SQS, Pub/Sub,
// RabbitMQ or NATS by changing the URL (and importing that driver).
func ExampleOpen() {
	ctx := context.Background()
	b, err := pubsubx.Open(ctx, "mem://example-open")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer b.Close()

	groups := filter.Groups{{EventType: "shop.order.placed"}}
	if err := b.CreateSubscription(ctx, "orders", groups); err != nil {
		fmt.Println("create:", err)
		return
	}
	err = b.Send(ctx, &pubsubx.Message{
		Body:     []byte(`{"id":1}`),
		Metadata: map[string]string{pubsubx.AttrEventType: "shop.order.placed"},
	})
	if err != nil {
		fmt.Println("send:", err)
		return
	}
	msgs, err := b.Receive(ctx, "orders", pubsubx.ReceiveParams{Max: 10, Wait: time.Second})
	if err != nil {
		fmt.Println("receive:", err)
		return
	}
	fmt.Println(len(msgs), msgs[0].EventType(), string(msgs[0].Body))
	_ = b.Ack(ctx, "orders", msgs)
	// Output: 1 shop.order.placed {"id":1}
}
