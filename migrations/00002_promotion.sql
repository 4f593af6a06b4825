-- The promotion module's tables (modules/promotion, docs/adr/0004-purchases.md).
--
-- Every rule the domain enforces is also a CHECK here, so that a row written
-- by hand, by a later migration or by a bug is refused by the database too.
-- The constraints deliberately leave room for what operators and black-box
-- tests do: deleting a purchase's target rows (the expiry job then treats the
-- purchase as a poison item) and moving starts_at and ends_at into the past
-- together. So there is no trigger on the targets and no rule tying
-- starts_at to created_at.

-- +goose Up
CREATE SCHEMA IF NOT EXISTS promotion;

-- The currencies a price may be in: a local copy of the handbook's reference
-- data, so prices have a foreign key. Only RUB is sold (ADR-0048).
CREATE TABLE promotion.currencies (
	id smallint PRIMARY KEY,
	iso_code text NOT NULL UNIQUE CHECK (iso_code ~ '^[A-Z]{3}$'),
	name text NOT NULL CHECK (name <> ''),
	sign text NOT NULL CHECK (sign <> '')
);

INSERT INTO promotion.currencies (id, iso_code, name, sign)
VALUES (643, 'RUB', 'Российский рубль', '₽');

-- Sellable packages. Editing one never touches the purchases made of it:
-- they hold snapshots (INV-2).
CREATE TABLE promotion.promotion_packages (
	id uuid PRIMARY KEY,
	code text NOT NULL,
	name text NOT NULL,
	kind text NOT NULL,
	duration_days integer NOT NULL,
	boost_weight integer NOT NULL,
	price_amount numeric(14, 2) NOT NULL,
	currency_id smallint NOT NULL REFERENCES promotion.currencies (id),
	is_active boolean NOT NULL DEFAULT true,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	-- The adapter maps a violation of this constraint (by name) to 409.
	CONSTRAINT promotion_packages_code_key UNIQUE (code),
	CONSTRAINT promotion_packages_code_check
		CHECK (code ~ '^[a-z0-9]+(-[a-z0-9]+)*$' AND char_length(code) <= 64),
	CONSTRAINT promotion_packages_name_check
		CHECK (btrim(name) <> '' AND char_length(name) <= 200),
	CONSTRAINT promotion_packages_kind_check
		CHECK (kind IN ('ProjectBoost', 'PropertyObjectBoost', 'PostBoost')),
	CONSTRAINT promotion_packages_duration_days_check CHECK (duration_days BETWEEN 1 AND 365),
	CONSTRAINT promotion_packages_boost_weight_check CHECK (boost_weight BETWEEN 1 AND 1000),
	CONSTRAINT promotion_packages_price_amount_check CHECK (price_amount >= 0),
	-- RUB only (ADR-0048); the foreign key alone would admit any currency
	-- that the reference table ever gets.
	CONSTRAINT promotion_packages_currency_check CHECK (currency_id = 643)
);

-- GET /promotion-packages lists the active packages.
CREATE INDEX promotion_packages_active_idx ON promotion.promotion_packages (code) WHERE is_active;

-- The PromotionPurchase aggregate. package_code, package_kind, boost_weight,
-- price_amount, currency_* are snapshots taken at purchase time (INV-2).
-- version is the domain version (1 after activation, +1 per transition),
-- published in the event and used for optimistic concurrency.
CREATE TABLE promotion.promotion_purchases (
	id uuid PRIMARY KEY,
	tenant_id uuid NOT NULL,
	package_id uuid NOT NULL REFERENCES promotion.promotion_packages (id),
	package_code text NOT NULL,
	package_kind text NOT NULL,
	boost_weight integer NOT NULL,
	price_amount numeric(14, 2) NOT NULL,
	currency_id smallint NOT NULL REFERENCES promotion.currencies (id),
	currency_iso_code text NOT NULL,
	currency_name text NOT NULL,
	currency_sign text NOT NULL,
	status text NOT NULL,
	payment_status text NOT NULL,
	starts_at timestamptz NOT NULL,
	ends_at timestamptz NOT NULL,
	cancel_reason text,
	created_by_user_id uuid NOT NULL,
	updated_by_user_id uuid,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	version bigint NOT NULL,
	CONSTRAINT promotion_purchases_tenant_id_check
		CHECK (tenant_id <> '00000000-0000-0000-0000-000000000000'),
	CONSTRAINT promotion_purchases_package_code_check CHECK (package_code <> ''),
	CONSTRAINT promotion_purchases_package_kind_check
		CHECK (package_kind IN ('ProjectBoost', 'PropertyObjectBoost', 'PostBoost')),
	CONSTRAINT promotion_purchases_boost_weight_check CHECK (boost_weight BETWEEN 1 AND 1000),
	CONSTRAINT promotion_purchases_price_amount_check CHECK (price_amount >= 0),
	CONSTRAINT promotion_purchases_currency_snapshot_check
		CHECK (currency_iso_code <> '' AND currency_name <> '' AND currency_sign <> ''),
	CONSTRAINT promotion_purchases_status_check
		CHECK (status IN ('Pending', 'Active', 'Expired', 'Cancelled')),
	CONSTRAINT promotion_purchases_payment_status_check
		CHECK (payment_status IN ('NotRequired', 'Pending', 'Paid', 'Refunded')),
	CONSTRAINT promotion_purchases_period_check CHECK (ends_at > starts_at),
	-- A cancellation always says why; nothing else carries a reason.
	CONSTRAINT promotion_purchases_cancel_reason_check CHECK (
		(status = 'Cancelled') = (cancel_reason IS NOT NULL)
		AND (cancel_reason IS NULL OR (btrim(cancel_reason) <> '' AND char_length(cancel_reason) <= 500))
	),
	CONSTRAINT promotion_purchases_version_check CHECK (version >= 1)
);

-- The expiry job's selection: Active purchases by ends_at, ties by id
-- (WHERE status = 'Active' AND ends_at <= $asOf ORDER BY ends_at, id).
-- Partial, so it holds only the live purchases and stays small.
CREATE INDEX promotion_purchases_expiry_idx
	ON promotion.promotion_purchases (ends_at, id) WHERE status = 'Active';

-- A tenant's list, newest first, with a keyset cursor on (created_at, id).
CREATE INDEX promotion_purchases_tenant_list_idx
	ON promotion.promotion_purchases (tenant_id, created_at DESC, id DESC);

-- What a purchase promotes: 1..10 targets (MaxTargetsPerPurchase), each at
-- most once, in the buyer's order (position).
CREATE TABLE promotion.promotion_purchase_targets (
	purchase_id uuid NOT NULL REFERENCES promotion.promotion_purchases (id) ON DELETE CASCADE,
	target_kind text NOT NULL,
	target_id uuid NOT NULL,
	position smallint NOT NULL,
	PRIMARY KEY (purchase_id, target_kind, target_id),
	CONSTRAINT promotion_purchase_targets_position_key UNIQUE (purchase_id, position),
	CONSTRAINT promotion_purchase_targets_kind_check
		CHECK (target_kind IN ('Project', 'PropertyObject', 'Post')),
	CONSTRAINT promotion_purchase_targets_id_check
		CHECK (target_id <> '00000000-0000-0000-0000-000000000000'),
	CONSTRAINT promotion_purchase_targets_position_check CHECK (position BETWEEN 0 AND 9)
);

-- Support and consumers' reconciliation ask "which purchases promote this
-- target?".
CREATE INDEX promotion_purchase_targets_target_idx
	ON promotion.promotion_purchase_targets (target_kind, target_id);

-- Idempotency-Key of POST /promotions, scoped to the tenant. A row is kept at
-- least 24 hours; rows older than that may be deleted (the module's
-- idempotency-key cleaner does so), after which the key buys anew.
-- request_hash is the SHA-256 of the canonical request, so a repeat with
-- another body is told apart (422).
CREATE TABLE promotion.idempotency_keys (
	tenant_id uuid NOT NULL,
	key text NOT NULL,
	request_hash text NOT NULL,
	-- Deferred: the key is claimed first (INSERT ... ON CONFLICT DO NOTHING),
	-- so a racing repeat waits on it before doing any work, and the purchase
	-- is inserted after it in the same transaction.
	purchase_id uuid NOT NULL
		REFERENCES promotion.promotion_purchases (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (tenant_id, key),
	CONSTRAINT idempotency_keys_key_check CHECK (char_length(key) BETWEEN 1 AND 255),
	CONSTRAINT idempotency_keys_request_hash_check CHECK (request_hash ~ '^[0-9a-f]{64}$')
);

CREATE INDEX idempotency_keys_created_at_idx ON promotion.idempotency_keys (created_at);

-- +goose Down
DROP TABLE IF EXISTS promotion.idempotency_keys;
DROP TABLE IF EXISTS promotion.promotion_purchase_targets;
DROP TABLE IF EXISTS promotion.promotion_purchases;
DROP TABLE IF EXISTS promotion.promotion_packages;
DROP TABLE IF EXISTS promotion.currencies;
DROP SCHEMA IF EXISTS promotion;
