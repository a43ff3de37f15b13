# attention_grouped_kernel (lib/model/cuda/kernels.cuh) transcribed to numpy, lane by lane and
# tile by tile in float32, against a reference in float64: a check of the
# kernel's arithmetic (tiles, online softmax, indexing) on the CPU, not of the
# CUDA code itself. Run: .venv/bin/python docs/results-cuda-prep/grouped_emulate.py
import numpy as np
TILE=32; WARPS=8; MAXHD=256
def kernel(y,q,kc,vc,slot,pos,maxT,NH,NKV,HD,r,g,threads):
    rep=NH//NKV; KD=NKV*HD; P=pos[r]+1; warps=threads//32
    kb=slot[r]*maxT*KD+g*HD
    qs=(q[(r*NH+g*rep)*HD:(r*NH+g*rep)*HD+rep*HD]*np.float32(1/np.sqrt(HD))).astype(np.float32)
    acc=np.zeros(rep*HD,np.float32); mx=np.full(rep,-np.inf,np.float32); sm=np.zeros(rep,np.float32)
    for t0 in range(0,P,TILE):
        n=min(TILE,P-t0)
        ks=np.zeros((TILE,HD+1),np.float32); vs=np.zeros((TILE,HD),np.float32)
        for e in range(n*HD):
            t,i=divmod(e,HD); at=kb+(t0+t)*KD+i
            ks[t,i]=kc[at]; vs[t,i]=vc[at]
        for w in range(warps):
            for j in range(w,rep,warps):
                s=np.full(32,-np.inf,np.float32)
                for lane in range(n):
                    acc_=np.float32(0)
                    for i in range(HD): acc_=np.float32(acc_+qs[j*HD+i]*ks[lane,i])
                    s[lane]=acc_
                old=mx[j]; nm=max(old,s.max())
                p=np.where(np.arange(32)<n,np.exp(s-nm),0).astype(np.float32); ts=p.sum(dtype=np.float32); resc=np.float32(np.exp(old-nm))
                for lane in range(32):
                    for k in range(MAXHD//32):
                        i=lane+32*k
                        if i>=HD: continue
                        a=acc[j*HD+i]*resc
                        for t in range(n): a=np.float32(a+p[t]*vs[t,i])
                        acc[j*HD+i]=a
                mx[j]=nm; sm[j]=sm[j]*resc+ts
    for e in range(rep*HD): y[(r*NH+g*rep)*HD+e]=acc[e]/sm[e//HD]
def ref(q,k,v,pos,maxT,NH,NKV,HD,R):
    rep=NH//NKV; KD=NKV*HD; y=np.zeros(R*NH*HD)
    for r in range(R):
        for h in range(NH):
            qh=q[(r*NH+h)*HD:(r*NH+h+1)*HD].astype(np.float64)
            idx=[(r*maxT+t)*KD+(h//rep)*HD for t in range(pos[r]+1)]
            K=np.array([k[i:i+HD] for i in idx],np.float64); V=np.array([v[i:i+HD] for i in idx],np.float64)
            s=K@qh/np.sqrt(HD); p=np.exp(s-s.max()); p/=p.sum()
            y[(r*NH+h)*HD:(r*NH+h+1)*HD]=p@V
    return y
rng=np.random.default_rng(1)
for NH,NKV,HD in [(14,2,64),(4,4,24),(8,1,40)]:
    R=3; pos=[0,32,40]; maxT=41
    q=rng.uniform(-1,1,R*NH*HD).astype(np.float32)
    k=rng.uniform(-1,1,R*maxT*NKV*HD).astype(np.float32); v=rng.uniform(-1,1,R*maxT*NKV*HD).astype(np.float32)
    y=np.zeros(R*NH*HD,np.float32)
    rep=NH//NKV
    for r in range(R):
        for g in range(NKV): kernel(y,q,k,v,list(range(R)),pos,maxT,NH,NKV,HD,r,g,32*min(rep,WARPS))
    print(NH,NKV,HD,"max gap",np.abs(y-ref(q,k,v,pos,maxT,NH,NKV,HD,R)).max())
