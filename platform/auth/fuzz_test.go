package auth_test

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/apperror"
	"github.com/pinmarket/pin/platform/auth"
)

// FuzzAuthenticate: Authenticate never panics, refuses with 401 only, and
// what it accepts is a token signed with the key whose principal has a user.
func FuzzAuthenticate(f *testing.F) {
	authn, err := auth.NewAuthenticator(testSecret)
	require.NoError(f, err)
	valid, err := authn.Issue(auth.Principal{UserID: userID, TenantID: tenantID, Roles: []string{auth.RoleAdmin}}, time.Hour)
	require.NoError(f, err)
	f.Add(valid)
	f.Add(sign(f, jwt.SigningMethodHS256, testSecret, with(validClaims(), "exp", "1767225600")))
	f.Add(sign(f, jwt.SigningMethodHS256, otherSecret, validClaims()))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Add("")
	f.Add("a.b.c")

	f.Fuzz(func(t *testing.T, raw string) {
		p, err := authn.Authenticate(raw)
		if err != nil {
			require.Equal(t, apperror.KindUnauthenticated, apperror.KindOf(err))
			return
		}
		require.NotEqual(t, uuid.Nil, p.UserID)
		_, err = jwt.Parse(raw, func(*jwt.Token) (any, error) { return testSecret, nil },
			jwt.WithValidMethods([]string{"HS256"}))
		require.NoError(t, err, "only a token signed with the key is accepted")
	})
}
