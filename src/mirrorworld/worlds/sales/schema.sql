-- Sales: CRM and order-to-cash of a wholesale supplier.
-- Money is exact decimal text ("1234.50"); unit prices carry 4 decimals.
-- Ids follow the order in which records are created, as in the real system.
-- Every child key is indexed: tools read a party's or a sale's records by it, and inserting a
-- parent row looks its children up by it.

CREATE TABLE parties (
    id      INTEGER PRIMARY KEY,
    code    TEXT NOT NULL UNIQUE,
    name    TEXT NOT NULL,
    role    TEXT NOT NULL CHECK (role IN ('company', 'employee', 'customer'))
);

CREATE TABLE addresses (
    id          INTEGER PRIMARY KEY,
    party_id    INTEGER NOT NULL REFERENCES parties(id),
    street      TEXT NOT NULL,
    city        TEXT NOT NULL,
    postal_code TEXT NOT NULL
);
CREATE INDEX addresses_party ON addresses(party_id);

CREATE TABLE contacts (
    id       INTEGER PRIMARY KEY,
    party_id INTEGER NOT NULL REFERENCES parties(id),
    type     TEXT NOT NULL CHECK (type IN ('email', 'phone')),
    value    TEXT NOT NULL
);
CREATE INDEX contacts_party ON contacts(party_id);

CREATE TABLE products (
    id          INTEGER PRIMARY KEY,
    code        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    list_price  TEXT NOT NULL,
    on_hand     INTEGER NOT NULL CHECK (on_hand >= 0)
);

CREATE TABLE opportunities (
    id          INTEGER PRIMARY KEY,
    number      TEXT NOT NULL,
    party_id    INTEGER NOT NULL REFERENCES parties(id),
    description TEXT NOT NULL,
    amount      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('lead', 'opportunity', 'converted', 'won', 'lost', 'cancelled')),
    lost_reason TEXT
);
CREATE INDEX opportunities_party ON opportunities(party_id);

CREATE TABLE sales (
    id              INTEGER PRIMARY KEY,
    number          TEXT,
    party_id        INTEGER NOT NULL REFERENCES parties(id),
    description     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('draft', 'quotation', 'confirmed', 'processing', 'done', 'cancelled')),
    invoice_state   TEXT NOT NULL,
    shipment_state  TEXT NOT NULL,
    opportunity_id  INTEGER REFERENCES opportunities(id)  -- the opportunity converted into this sale
);
CREATE INDEX sales_party ON sales(party_id);
CREATE INDEX sales_opportunity ON sales(opportunity_id);

CREATE TABLE sale_lines (
    id          INTEGER PRIMARY KEY,
    sale_id     INTEGER NOT NULL REFERENCES sales(id),
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL,
    unit_price  TEXT NOT NULL,
    discount    TEXT NOT NULL
);
CREATE INDEX sale_lines_sale ON sale_lines(sale_id);

CREATE TABLE approvals (
    id        INTEGER PRIMARY KEY,
    sale_id   INTEGER NOT NULL REFERENCES sales(id),
    discount  TEXT NOT NULL,
    reason    TEXT NOT NULL
);
CREATE INDEX approvals_sale ON approvals(sale_id);

CREATE TABLE shipments (
    id       INTEGER PRIMARY KEY,
    sale_id  INTEGER NOT NULL REFERENCES sales(id),
    state    TEXT NOT NULL CHECK (state IN ('waiting', 'assigned', 'done', 'cancelled'))
);
CREATE INDEX shipments_sale ON shipments(sale_id);

CREATE TABLE invoices (
    id            INTEGER PRIMARY KEY,
    sale_id       INTEGER NOT NULL REFERENCES sales(id),
    number        TEXT,
    state         TEXT NOT NULL CHECK (state IN ('draft', 'posted', 'paid', 'cancelled')),
    untaxed       TEXT NOT NULL,
    tax           TEXT NOT NULL,
    total         TEXT NOT NULL,
    paid          TEXT NOT NULL
);
CREATE INDEX invoices_sale ON invoices(sale_id);

CREATE TABLE sequences (
    name TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);

-- Record ids the system draws and never reuses, even after a delete (sale lines can be removed).
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);
