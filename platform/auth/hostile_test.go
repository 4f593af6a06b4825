package auth_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/auth"
)

// Forged and lenient tokens (ADR 0005): each is refused with 401.

func TestAuthenticateRefusesLenientTokens(t *testing.T) {
	t.Parallel()
	now := time.Now()
	plain, err := auth.NewAuthenticator(testSecret)
	require.NoError(t, err)
	strict, err := auth.NewAuthenticator(testSecret,
		auth.WithIssuer("https://id.pin.dev"), auth.WithAudience("pin-promotion"), auth.WithMaxTTL(2*time.Hour))
	require.NoError(t, err)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, c) }
	strictClaims := with(with(validClaims(), "iss", "https://id.pin.dev"), "aud", []string{"pin-promotion", "other"})

	tests := []struct {
		name  string
		authn *auth.Authenticator
		token string
		ok    bool
	}{
		{"exp as a number", plain, hs(validClaims()), true},
		{"exp as a string", plain, hs(with(validClaims(), "exp", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))), false},
		{"iat as a string", plain, hs(with(validClaims(), "iat", strconv.FormatInt(now.Unix(), 10))), false},
		{"exp a year ahead", plain, hs(with(validClaims(), "exp", now.Add(365*24*time.Hour).Unix())), false},
		{"exp within the default maximum", plain, hs(with(validClaims(), "exp", now.Add(24*time.Hour).Unix())), true},
		{"no issuer or audience needed when none is configured", plain, hs(validClaims()), true},
		{"issuer and audience as configured", strict, hs(strictClaims), true},
		{"aud as a single string", strict, hs(with(strictClaims, "aud", "pin-promotion")), true},
		{"no issuer", strict, hs(with(strictClaims, "iss", nil)), false},
		{"another issuer", strict, hs(with(strictClaims, "iss", "https://evil.example")), false},
		{"no audience", strict, hs(with(strictClaims, "aud", nil)), false},
		{"another audience", strict, hs(with(strictClaims, "aud", "billing")), false},
		{"lifetime over the maximum from iat", strict, hs(with(with(strictClaims, "iat", now.Add(-2*time.Hour).Unix()),
			"exp", now.Add(time.Hour).Unix())), false},
		{"exp further than the maximum from now", strict, hs(with(strictClaims, "exp", now.Add(3*time.Hour).Unix())), false},
		{"oversized token", plain, hs(with(validClaims(), "pad", strings.Repeat("a", auth.MaxTokenBytes))), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tt.authn.Authenticate(tt.token)
			if tt.ok {
				require.NoError(t, err)
				require.Equal(t, userID, p.UserID)
				return
			}
			require.Error(t, err)
			require.Equal(t, apperror.KindUnauthenticated, apperror.KindOf(err))
		})
	}
}

// TestAuthenticateForgivesClockSkewOnlyWithinTheLeeway: iat and nbf up to
// auth.ClockLeeway ahead of this instance's clock, and exp up to it behind,
// are a skewed clock and pass; further is a token from the future (or a
// dead one) and is 401. The margins (10 s) are far above the test's own run.
func TestAuthenticateForgivesClockSkewOnlyWithinTheLeeway(t *testing.T) {
	t.Parallel()
	authn, err := auth.NewAuthenticator(testSecret)
	require.NoError(t, err)
	now := time.Now()
	within, beyond := now.Add(auth.ClockLeeway-10*time.Second).Unix(), now.Add(auth.ClockLeeway+10*time.Second).Unix()
	tests := []struct {
		name   string
		claims jwt.MapClaims
		want   error // nil: accepted
	}{
		{"iat now", with(validClaims(), "iat", now.Unix()), nil},
		{"iat ahead within the leeway", with(validClaims(), "iat", within), nil},
		{"iat ahead beyond the leeway", with(validClaims(), "iat", beyond), jwt.ErrTokenUsedBeforeIssued},
		{"iat an hour ahead", with(validClaims(), "iat", now.Add(time.Hour).Unix()), jwt.ErrTokenUsedBeforeIssued},
		{"nbf ahead within the leeway", with(validClaims(), "nbf", within), nil},
		{"nbf ahead beyond the leeway", with(validClaims(), "nbf", beyond), jwt.ErrTokenNotValidYet},
		{"exp behind within the leeway", with(validClaims(), "exp", now.Add(-auth.ClockLeeway+10*time.Second).Unix()), nil},
		{"exp behind beyond the leeway", with(validClaims(), "exp", now.Add(-auth.ClockLeeway-10*time.Second).Unix()), jwt.ErrTokenExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := authn.Authenticate(sign(t, jwt.SigningMethodHS256, testSecret, tt.claims))
			if tt.want == nil {
				require.NoError(t, err)
				require.Equal(t, userID, p.UserID)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, apperror.KindUnauthenticated, apperror.KindOf(err))
		})
	}
}

func TestIssueStaysWithinTheConfiguredClaims(t *testing.T) {
	t.Parallel()
	authn, err := auth.NewAuthenticator(testSecret,
		auth.WithIssuer("https://id.pin.dev"), auth.WithAudience("pin-promotion"), auth.WithMaxTTL(48*time.Hour))
	require.NoError(t, err)
	p := auth.Principal{UserID: userID, TenantID: tenantID}

	_, err = authn.Issue(p, 49*time.Hour)
	require.Error(t, err, "a token it would refuse is not minted")

	token, err := authn.Issue(p, 48*time.Hour)
	require.NoError(t, err)
	got, err := authn.Authenticate(token)
	require.NoError(t, err, "what it mints, it accepts")
	require.Equal(t, p.TenantID, got.TenantID)

	claims := jwt.MapClaims{}
	_, _, err = jwt.NewParser().ParseUnverified(token, claims)
	require.NoError(t, err)
	require.Equal(t, "https://id.pin.dev", claims["iss"])
	require.Equal(t, []any{"pin-promotion"}, claims["aud"])

	_, err = auth.NewAuthenticator(testSecret, auth.WithMaxTTL(0))
	require.Error(t, err)
}
