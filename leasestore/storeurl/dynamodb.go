//go:build !herald_gcp

package storeurl

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gocloud.dev/docstore"
	awsdynamodb "gocloud.dev/docstore/awsdynamodb/v2"

	"github.com/heraldevents/herald/herr"
)

// dynamoDBClient is the type of Opener.DynamoDB in a build that links
// DynamoDB.
type dynamoDBClient = *dynamodb.Client

var openDynamoDB openFunc = (*Opener).openDynamoDB

// CreateTableTimeout bounds how long CreateTable waits for a new table to
// become ACTIVE.
const CreateTableTimeout = 2 * time.Minute

// TableInput returns the definition of a lease store table named table:
// partition key "key" of type S, no sort key, on-demand billing. The SAM
// template declares the same table.
func TableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(KeyField), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(KeyField), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// CreateTable creates the lease store table named table (see TableInput)
// and waits up to CreateTableTimeout until it is ACTIVE. It fails with
// herr.AlreadyExists if the table exists.
func CreateTable(ctx context.Context, db *dynamodb.Client, table string) error {
	if _, err := db.CreateTable(ctx, TableInput(table)); err != nil {
		var inUse *types.ResourceInUseException
		if errors.As(err, &inUse) {
			return herr.Wrap(herr.AlreadyExists, err, "DynamoDB table "+table+" already exists")
		}
		return herr.Wrap(herr.Unavailable, err, "create DynamoDB table "+table)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		// The default first wait is 20 s; local servers are ready at once.
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, CreateTableTimeout); err != nil {
		return herr.Wrap(herr.Unavailable, err, "DynamoDB table "+table+" did not become active")
	}
	return nil
}

// openDynamoDB opens dynamodb://TABLE?partition_key=key&….
func (o *Opener) openDynamoDB(ctx context.Context, u *url.URL) (*docstore.Collection, error) {
	allowed := []string{"partition_key", "region", "endpoint", "profile"}
	if o.DynamoDB != nil {
		allowed = allowed[:1]
	}
	p, err := params(u, allowed...)
	if err != nil {
		return nil, err
	}
	table := u.Host
	if table == "" || (u.Path != "" && u.Path != "/") {
		return nil, herr.New(herr.InvalidArgument, "store URL dynamodb://: the table name is the URL's host, and the URL has no path (dynamodb://TABLE?partition_key=key)")
	}
	if err := requireKeyField("dynamodb", "partition_key", p["partition_key"]); err != nil {
		return nil, err
	}
	db := o.DynamoDB
	if db == nil {
		if db, err = dynamoClient(ctx, p); err != nil {
			return nil, err
		}
	}
	if err := checkTable(ctx, db, table); err != nil {
		return nil, err
	}
	coll, err := awsdynamodb.OpenCollection(db, table, KeyField, "", &awsdynamodb.Options{
		// ListConsumers filters on "kind", which only a scan can answer.
		AllowScans: true,
		// A stale read of a consumer makes an acknowledgement of a lease
		// that exists answer "stale"; conditional writes alone do not
		// prevent that.
		ConsistentRead: true,
	})
	if err != nil {
		return nil, herr.Wrap(herr.Unavailable, err, "open DynamoDB table "+table)
	}
	return coll, nil
}

// dynamoClient builds a DynamoDB client from the AWS SDK's default
// configuration and the URL's region, endpoint and profile.
func dynamoClient(ctx context.Context, p map[string]string) (*dynamodb.Client, error) {
	var opts []func(*config.LoadOptions) error
	if r, ok := p["region"]; ok {
		if r == "" {
			return nil, herr.New(herr.InvalidArgument, "store URL dynamodb://: region is empty")
		}
		opts = append(opts, config.WithRegion(r))
	}
	if prof, ok := p["profile"]; ok {
		opts = append(opts, config.WithSharedConfigProfile(prof))
	}
	endpoint, hasEndpoint := p["endpoint"]
	if hasEndpoint {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, herr.New(herr.InvalidArgument, "store URL dynamodb://: endpoint must be an http or https URL such as http://127.0.0.1:5000")
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		// A missing or broken profile, or a malformed shared config file.
		return nil, herr.Wrap(herr.InvalidArgument, err, "store URL dynamodb://: cannot load the AWS configuration")
	}
	if cfg.Region == "" {
		return nil, herr.New(herr.InvalidArgument, "store URL dynamodb://: no AWS region: add region= to the URL or set AWS_REGION")
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if hasEndpoint {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// checkTable fails unless table exists with the lease store's key schema,
// so that a wrong table is reported at start-up, not at the first write.
func checkTable(ctx context.Context, db *dynamodb.Client, table string) error {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return herr.Wrap(herr.NotFound, err, "DynamoDB table "+table+" does not exist; create it with partition key \"key\" (S) and no sort key")
		}
		return herr.Wrap(herr.Unavailable, err, "describe DynamoDB table "+table)
	}
	ks := out.Table.KeySchema
	if len(ks) != 1 || aws.ToString(ks[0].AttributeName) != KeyField || ks[0].KeyType != types.KeyTypeHash {
		return herr.New(herr.FailedPrecondition, "DynamoDB table %s must have partition key %q and no sort key", table, KeyField)
	}
	return nil
}
