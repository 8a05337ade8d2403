package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// A transport drives a stream session: open it, hand out what Next
// returns, settle the delivery tags the client sends back, close it.
func ExampleService_OpenStream() {
	ctx := context.Background()
	coll, _ := memdocstore.OpenCollection("key", nil)
	defer coll.Close()
	broker := mem.New(time.Minute)
	defer broker.Close()
	svc := delivery.New(delivery.Config{Broker: broker, Store: leasestore.New(coll, leasestore.Options{})})
	p := &auth.Principal{ID: "app", Permissions: []string{auth.PermAll}}

	q, _ := svc.CreateQueue(ctx, p, delivery.CreateQueueParams{ID: "myapp-uploads-queue"})
	st, err := svc.OpenStream(ctx, p, delivery.StreamRequest{Kind: delivery.Durable, QueueID: "myapp-uploads-queue"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close(ctx)
	_, _ = svc.Publish(ctx, p, delivery.Event{EventType: "myapp.file.uploaded", Message: json.RawMessage(`{"file":"a.pdf"}`)})

	ds, _ := st.Next(ctx)
	for _, d := range ds {
		fmt.Println(q.Created, d.Tag, d.DeliveryCount, d.Event.EventType, string(d.Event.Message))
		rep, _ := st.Ack(ctx, d.Tag)
		fmt.Println("acked", rep.Acked)
	}
	// Output:
	// true 1 1 myapp.file.uploaded {"file":"a.pdf"}
	// acked 1
}
