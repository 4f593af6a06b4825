package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/modules/promotion/internal/domain"
	"github.com/pinmarket/pin/platform/apperror"
)

func activePackage(tb testing.TB) *domain.Package {
	tb.Helper()
	p, err := domain.NewPackage(uuid.New(), validPackageSpec(), testNow.Add(-time.Hour))
	require.NoError(tb, err)
	return p
}

func projectTargets(n int) []domain.TargetRef {
	refs := make([]domain.TargetRef, n)
	for i := range refs {
		refs[i] = domain.TargetRef{Kind: domain.TargetKindProject, ID: uuid.New()}
	}
	return refs
}

func newPurchase(tb testing.TB) *domain.Purchase {
	tb.Helper()
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(),
		Package: activePackage(tb), Targets: projectTargets(2), Now: testNow,
	})
	require.NoError(tb, err)
	return p
}

func TestNewPurchaseIsActivatedAtOnce(t *testing.T) {
	t.Parallel()
	pkg := activePackage(t)
	refs := projectTargets(3)
	user := uuid.New()
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: user, Package: pkg, Targets: refs, Now: testNow,
	})
	require.NoError(t, err)

	now := testNow.Truncate(time.Microsecond)
	require.Equal(t, domain.StatusActive, p.Status())
	require.Equal(t, domain.PaymentNotRequired, p.PaymentStatus())
	require.Equal(t, int64(1), p.Version())
	require.Equal(t, now, p.StartsAt())
	require.Equal(t, now.Add(7*24*time.Hour), p.EndsAt())
	require.Equal(t, now, p.CreatedAt())
	require.Equal(t, now, p.UpdatedAt())
	require.Equal(t, pkg.ID(), p.PackageID())
	require.Equal(t, pkg.Code(), p.PackageCode())
	require.Equal(t, pkg.Kind(), p.PackageKind())
	require.Equal(t, pkg.BoostWeight(), p.BoostWeight())
	require.True(t, pkg.Price().Equal(p.Price()))
	require.Equal(t, user, p.CreatedByUserID())
	require.Equal(t, uuid.Nil, p.UpdatedByUserID())
	require.Len(t, p.Targets(), 3)
	for i, target := range p.Targets() {
		require.Equal(t, refs[i].ID, target.ID(), "order is kept")
	}
}

func TestNewPurchaseKeepsSnapshots(t *testing.T) {
	t.Parallel()
	pkg := activePackage(t)
	p, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: pkg, Targets: projectTargets(1), Now: testNow,
	})
	require.NoError(t, err)

	weight, code := 999, "renamed"
	require.NoError(t, pkg.Update(domain.PackageChanges{BoostWeight: &weight, Code: &code}, testNow))
	require.Equal(t, 10, p.BoostWeight(), "INV-2")
	require.Equal(t, "project-boost-week", p.PackageCode(), "INV-2")
}

func TestNewPurchaseRules(t *testing.T) {
	t.Parallel()
	inactive := activePackage(t)
	off := false
	require.NoError(t, inactive.Update(domain.PackageChanges{IsActive: &off}, testNow))
	dup := uuid.New()

	tests := []struct {
		name    string
		pkg     *domain.Package
		targets []domain.TargetRef
		fields  []string
	}{
		{"unknown package", nil, projectTargets(1), []string{"packageId"}},
		{"inactive package", inactive, projectTargets(1), []string{"packageId"}},
		{"no targets", activePackage(t), nil, []string{"targets"}},
		{"eleven targets", activePackage(t), projectTargets(11), []string{"targets"}},
		{"kind not admitted", activePackage(t),
			[]domain.TargetRef{{Kind: domain.TargetKindProject, ID: uuid.New()}, {Kind: domain.TargetKindPost, ID: uuid.New()}},
			[]string{"targets[1].targetKind"}},
		{"unknown kind", activePackage(t), []domain.TargetRef{{Kind: "Banner", ID: uuid.New()}}, []string{"targets[0].targetKind"}},
		{"nil id", activePackage(t), []domain.TargetRef{{Kind: domain.TargetKindProject}}, []string{"targets[0].targetId"}},
		{"same target twice", activePackage(t),
			[]domain.TargetRef{{Kind: domain.TargetKindProject, ID: dup}, {Kind: domain.TargetKindProject, ID: uuid.New()}, {Kind: domain.TargetKindProject, ID: dup}},
			[]string{"targets[2]"}},
		{"several at once", activePackage(t),
			[]domain.TargetRef{{Kind: "x"}, {Kind: domain.TargetKindPost, ID: uuid.New()}},
			[]string{"targets[0].targetKind", "targets[0].targetId", "targets[1].targetKind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := domain.NewPurchase(domain.NewPurchaseParams{
				ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: tt.pkg, Targets: tt.targets, Now: testNow,
			})
			requireFields(t, err, tt.fields...)
		})
	}
}

func TestNewPurchaseAcceptsTenTargets(t *testing.T) {
	t.Parallel()
	_, err := domain.NewPurchase(domain.NewPurchaseParams{
		ID: uuid.New(), TenantID: uuid.New(), CreatedBy: uuid.New(), Package: activePackage(t),
		Targets: projectTargets(domain.MaxTargetsPerPurchase), Now: testNow,
	})
	require.NoError(t, err)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	p := newPurchase(t)
	admin := uuid.New()
	at := testNow.Add(time.Hour)

	require.NoError(t, p.Cancel("  changed our mind  ", admin, at))
	require.Equal(t, domain.StatusCancelled, p.Status())
	require.Equal(t, "changed our mind", p.CancelReason())
	require.Equal(t, admin, p.UpdatedByUserID())
	require.Equal(t, int64(2), p.Version())
	require.Equal(t, at.Truncate(time.Microsecond), p.UpdatedAt())

	err := p.Cancel("again", admin, at.Add(time.Hour))
	require.ErrorIs(t, err, domain.ErrPurchaseTerminal)
	require.Equal(t, apperror.KindConflict, apperror.KindOf(err))
	require.Equal(t, int64(2), p.Version(), "INV-6: nothing leaves Cancelled")

	err = p.Expire(p.EndsAt().Add(time.Hour))
	require.ErrorIs(t, err, domain.ErrPurchaseTerminal)
	require.Equal(t, domain.StatusCancelled, p.Status())
}

func TestCancelReasonRules(t *testing.T) {
	t.Parallel()
	for name, reason := range map[string]string{"empty": "", "blank": " \t ", "too long": strings.Repeat("я", 501)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newPurchase(t)
			requireFields(t, p.Cancel(reason, uuid.New(), testNow), "reason")
			require.Equal(t, domain.StatusActive, p.Status())
			require.Equal(t, int64(1), p.Version())
		})
	}
	p := newPurchase(t)
	require.NoError(t, p.Cancel(strings.Repeat("я", 500), uuid.New(), testNow))
}

func TestCancelPending(t *testing.T) {
	t.Parallel()
	p := unmarshal(t, domain.StatusPending, 0)
	require.NoError(t, p.Cancel("no longer needed", uuid.New(), testNow))
	require.Equal(t, domain.StatusCancelled, p.Status())
	require.Equal(t, int64(1), p.Version())
}

func TestExpire(t *testing.T) {
	t.Parallel()
	p := newPurchase(t)

	err := p.Expire(p.EndsAt().Add(-time.Microsecond))
	require.ErrorIs(t, err, domain.ErrPurchaseNotDue)
	require.Equal(t, domain.StatusActive, p.Status())

	q := newPurchase(t)
	require.NoError(t, q.Expire(q.EndsAt()), "EndsAt <= asOf is due")
	require.Equal(t, domain.StatusExpired, q.Status())
	require.Equal(t, int64(2), q.Version())
	require.Equal(t, q.EndsAt(), q.UpdatedAt())
	require.Equal(t, uuid.Nil, q.UpdatedByUserID())

	require.ErrorIs(t, q.Expire(q.EndsAt().Add(time.Hour)), domain.ErrPurchaseTerminal)
	require.ErrorIs(t, q.Cancel("late", uuid.New(), testNow), domain.ErrPurchaseTerminal)
	require.Equal(t, int64(2), q.Version(), "INV-6: nothing leaves Expired")
}

func TestExpireOnlyActive(t *testing.T) {
	t.Parallel()
	p := unmarshal(t, domain.StatusPending, 0)
	err := p.Expire(testNow.Add(365 * 24 * time.Hour))
	require.ErrorIs(t, err, domain.ErrTransitionNotAllowed)
	require.Equal(t, domain.StatusPending, p.Status())
}

func TestIsVisibleTo(t *testing.T) {
	t.Parallel()
	p := newPurchase(t)
	require.True(t, p.IsVisibleTo(p.TenantID(), false))
	require.False(t, p.IsVisibleTo(uuid.New(), false))
	require.False(t, p.IsVisibleTo(uuid.Nil, false))
	require.True(t, p.IsVisibleTo(uuid.Nil, true))
}

func TestUnmarshalPurchaseFromDatabase(t *testing.T) {
	t.Parallel()
	p := unmarshal(t, domain.StatusActive, 3)
	require.Equal(t, int64(3), p.Version())

	_, err := domain.UnmarshalPurchaseFromDatabase(domain.PurchaseFromDatabase{
		ID: uuid.New(), Status: "NoSuchStatus", // a status no revision will add
		PaymentStatus: domain.PaymentNotRequired, PackageKind: domain.PackageKindPostBoost,
	})
	require.Error(t, err)
	_, err = domain.UnmarshalPurchaseFromDatabase(domain.PurchaseFromDatabase{
		ID: uuid.New(), Status: domain.StatusActive, PaymentStatus: domain.PaymentNotRequired, PackageKind: domain.PackageKindPostBoost,
		Targets: []domain.Target{domain.UnmarshalTargetFromDatabase("Banner", uuid.New())},
	})
	require.Error(t, err)
}

func TestNewTarget(t *testing.T) {
	t.Parallel()
	_, err := domain.NewTarget(domain.TargetKindPost, uuid.Nil)
	requireFields(t, err, "targetId")
	_, err = domain.NewTarget("Banner", uuid.New())
	requireFields(t, err, "targetKind")
	target, err := domain.NewTarget(domain.TargetKindPost, uuid.New())
	require.NoError(t, err)
	require.Equal(t, domain.TargetKindPost, target.Kind())
}

func TestPackageKindAdmits(t *testing.T) {
	t.Parallel()
	for kind, want := range map[domain.PackageKind]domain.TargetKind{
		domain.PackageKindProjectBoost:        domain.TargetKindProject,
		domain.PackageKindPropertyObjectBoost: domain.TargetKindPropertyObject,
		domain.PackageKindPostBoost:           domain.TargetKindPost,
	} {
		got, ok := kind.AdmittedTargetKind()
		require.True(t, ok)
		require.Equal(t, want, got)
	}
	_, ok := domain.PackageKind("Banner").AdmittedTargetKind()
	require.False(t, ok)
}

func unmarshal(tb testing.TB, status domain.Status, version int64) *domain.Purchase {
	tb.Helper()
	p, err := domain.UnmarshalPurchaseFromDatabase(domain.PurchaseFromDatabase{
		ID: uuid.New(), TenantID: uuid.New(), PackageID: uuid.New(), PackageCode: "post-boost-week",
		PackageKind: domain.PackageKindPostBoost, BoostWeight: 5,
		Targets: []domain.Target{domain.UnmarshalTargetFromDatabase(domain.TargetKindPost, uuid.New())},
		Status:  status, PaymentStatus: domain.PaymentNotRequired,
		StartsAt: testNow, EndsAt: testNow.Add(24 * time.Hour), CreatedAt: testNow, UpdatedAt: testNow, Version: version,
	})
	require.NoError(tb, err)
	return p
}
